"""RULER variable tracking (vt). Reference: NVIDIA/RULER scripts/data/synthetic/variable_tracking.py
(noise haystack, 1 chain, 4 hops). Metric: string_match_all over the 5 variable names.

A chain "VAR ABCDE = 12345", "VAR FGHIJ = VAR ABCDE ", ... is spread over noise lines; one
in-context example (3-letter names, 4 hops, noise filling ~500 tokens, answered) precedes the
task. Unit for length fitting: one noise line.

    harness generate --tasks vt --lengths 4k --samples 10 --out data/
"""

from __future__ import annotations

import string

import numpy as np

from tasks.ruler import templates as T
from tasks.ruler.common import RulerTask
from tasks.ruler.fitting import Counter, sample_rng
from tasks.ruler.niah import _noise_line_cost

NUM_HOPS = 4
ICL_TOKENS = 500  # the reference fits its example to max_seq_length=500 (no special tokens)


def _names(rng, k: int, count: int) -> list[str]:
    out: list[str] = []
    while len(out) < count:  # distinct names (the reference's dedupe loop never used its extra draws)
        name = "".join(rng.choices(string.ascii_uppercase, k=k))
        if name not in out:
            out.append(name)
    return out


def _chain(names: list[str], value: str) -> list[str]:
    return [f"VAR {names[0]} = {value}"] + [f"VAR {names[j + 1]} = VAR {names[j]} " for j in range(len(names) - 1)]


def _context(chain: list[str], n: int, rng) -> str:
    lines = [T.NOISE] * n
    positions = sorted(rng.sample(range(len(lines)), len(chain)))
    for j, p in enumerate(positions):
        lines.insert(p + j, chain[j])
    return "\n".join(lines).replace(". \n", ".\n")


def _task_text(context: str, value: str) -> tuple[str, str]:
    return (
        T.VT_TEMPLATE.format(context=context, query=value),
        T.VT_ANSWER_PREFIX.format(num_v=NUM_HOPS + 1, query=value),
    )


def _icl_lines(counter: Counter) -> int:
    """Noise lines of the in-context example: most lines with tokens(example) <= 500 (cached)."""
    if "vt_icl_lines" not in counter.tables:
        r = sample_rng("vt-icl-calibration")
        names, chain = None, None
        names = _names(r, 3, NUM_HOPS + 1)
        chain = _chain(names, "12345")
        lo, hi = NUM_HOPS + 1, 400
        while lo < hi:  # tokens grow with n: bisect for the largest n that fits
            mid = (lo + hi + 1) // 2
            text = "".join(_task_text(_context(chain, mid, sample_rng("vt-icl-pos", mid)), "12345"))
            if counter.pieces([text])[0] <= ICL_TOKENS:
                lo = mid
            else:
                hi = mid - 1
        counter.tables["vt_icl_lines"] = lo
    return counter.tables["vt_icl_lines"]


class VtPlan:
    def __init__(self, parts: tuple, counter: Counter):
        self.parts = parts
        rng = sample_rng(*parts)
        self.names = _names(rng, 5, NUM_HOPS + 1)
        self.value = str(rng.randint(10000, 99998))  # np.random.randint(10000, 99999): high exclusive
        self.chain = _chain(self.names, self.value)
        icl_names = _names(rng, 3, NUM_HOPS + 1)
        icl_value = str(rng.randint(10000, 99998))
        icl_inp, icl_pre = _task_text(_context(_chain(icl_names, icl_value), _icl_lines(counter), rng), icl_value)
        self.icl = icl_inp + icl_pre + " " + " ".join(icl_names) + "\n"
        self.references = list(self.names)
        self.min_units = len(self.chain)
        self.max_units = None
        self.line = _noise_line_cost(counter)

    def render(self, n: int) -> tuple[str, str]:
        inp, pre = _task_text(_context(self.chain, n, sample_rng(*self.parts, "positions", n)), self.value)
        return self.icl + "\n" + inp, pre

    def guess(self, tokens_left: float) -> int:
        return int(self.min_units + tokens_left / self.line) + 1

    def model(self, n: np.ndarray) -> np.ndarray:
        return n * self.line

    def metadata(self, n: int) -> dict:
        return {"haystack": "noise"}


class VtTask(RulerTask):
    name = "vt"
    metric = "string_match_all"
    max_new_tokens = T.VT_TOKENS

    def plan(self, length, parts, counter, index):
        return VtPlan(parts, counter)
