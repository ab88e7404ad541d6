"""HELMET (princeton-nlp/HELMET): tasks helmet_*, suite "helmet" (all seven categories) and
"helmet-nojudge" (without the three judged tasks).

    harness eval --suite helmet --helmet-data DIR [--judge-base-url URL --judge-model NAME]

By default (--protocol reference) the model sees HELMET's own inputs: its released per-length files
at its lengths 8K-128K, its items, sample counts and chat policy (tasks.helmet.reference, .released;
docs/helmet-parity.md); --protocol exact-length fills any length in the evaluated model's tokens.

tasks.helmet.tasks: recall, RAG, re-ranking; tasks.helmet.alce: citations; tasks.helmet.judged:
NarrativeQA and Multi-LexSum (judged); tasks.helmet.infbench: InfiniteBench QA, choice and Sum; the ICL category is this harness's HELMET ICL (tasks.icl), run
under the names helmet_icl_* so it reports inside the HELMET suite.
"""

from tasks.helmet import alce as _alce  # noqa: F401  (registers tasks)
from tasks.helmet import infbench as _infbench  # noqa: F401
from tasks.helmet import judged as _judged  # noqa: F401
from tasks.helmet import tasks as _tasks  # noqa: F401
from tasks.helmet.suite import CATEGORIES, HELMET_TASKS  # noqa: F401  (registers the suites)
