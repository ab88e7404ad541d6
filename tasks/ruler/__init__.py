"""The 13 RULER tasks and the suites "ruler" (13) and "ruler-llama2" (11, as the paper uses for
LLaMA-2-7B: without niah_multikey_3 and cwe).

    harness generate --suite ruler --lengths 4k-128k --samples 100 --out data/
"""

from __future__ import annotations

from tasks.registry import register_suite, register_task
from tasks.ruler.niah import NIAH_TASKS

# RULER's 13 tasks in its README order: the one list (tasks.suites, the benchmarks and tests read it)
RULER_TASKS = [
    "niah_single_1",
    "niah_single_2",
    "niah_single_3",
    "niah_multikey_1",
    "niah_multikey_2",
    "niah_multikey_3",
    "niah_multivalue",
    "niah_multiquery",
    "vt",
    "cwe",
    "fwe",
    "qa_1",
    "qa_2",
]

for _cls in NIAH_TASKS:
    register_task(_cls)

from tasks.ruler.cwe import CweTask
from tasks.ruler.fwe import FweTask
from tasks.ruler.qa import Qa1, Qa2
from tasks.ruler.vt import VtTask

for _other in (VtTask, CweTask, FweTask, Qa1, Qa2):
    register_task(_other)

register_suite(
    "ruler", RULER_TASKS, help="RULER: 13 synthetic long-context tasks (NVIDIA/RULER)", label="RULER", order=0
)
register_suite(
    "ruler-llama2",
    [t for t in RULER_TASKS if t not in ("niah_multikey_3", "cwe")],
    help="RULER without niah_multikey_3 and cwe (the 11 tasks the paper uses for LLaMA-2-7B)",
)
