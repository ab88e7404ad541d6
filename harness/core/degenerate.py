"""Degenerate output, named: empty predictions, predictions that ran to max new tokens, and
predictions that repeat one short span. A table of zeros made of such outputs is a broken set-up
(a wrong chat template or answer prefix, a model that emits EOS at once or never stops), not a
score; results.json records the shares per task and length, and every report flags them.

    from harness.core.degenerate import Degenerate, is_repeating
    d = Degenerate.of(records, tokenizer)   # counts over records; tokenizer: the fallback count
"""

from __future__ import annotations

from dataclasses import dataclass

# A cell is flagged when at least this share of its predictions is of one degenerate kind.
FLAG_SHARE = 0.5
# A repeating output: its second half is one span of at most this many characters, over and over.
MAX_PERIOD = 32
MIN_REPEATS = 3

_CAUSES = {
    "empty": "the model emits EOS at once: a wrong chat template or answer prefix, a base model run with --chat, "
    "a tokenizer that is not the model's, or a broken checkpoint",
    "identical": "the output does not depend on the prompt: a broken checkpoint, a context the backend cut, "
    "or a prompt truncated to almost nothing",
    "at_max": "the model never stops: an EOS id that is not the model's (tokenizer or generation_config), "
    "a base model asked a chat question, or RoPE scaling lost past the trained length",
}


def describe_causes(kind: str) -> str:
    """The likely causes of one degenerate kind, for a one-line message."""
    return "likely " + _CAUSES[kind]


def is_repeating(text: str) -> bool:
    """Whether the second half of `text` is one span of <= MAX_PERIOD characters repeated at least
    MIN_REPEATS times (a looping generation, "the the the" or "42. 42. 42."), whitespace kept."""
    half = text[len(text) // 2 :]
    for period in range(1, MAX_PERIOD + 1):
        if len(half) < period * MIN_REPEATS:
            break
        if all(half[i] == half[i + period] for i in range(len(half) - period)):
            return True
    return False


def _new_tokens(record: dict, tokenizer) -> int | None:
    """Tokens the model generated: the runner's own count (hf, vLLM), else the prediction
    re-encoded (a served model; decode-then-encode may give a token less than were generated)."""
    compute = record.get("compute")
    if isinstance(compute, dict) and isinstance(compute.get("new_tokens"), int):
        return compute["new_tokens"]
    if tokenizer is None:
        return None
    raw = (record.get("metadata") or {}).get("raw_prediction", record.get("prediction") or "")
    return len(tokenizer(raw, add_special_tokens=False)["input_ids"])


def at_max(record: dict, tokenizer=None) -> bool:
    """Whether a generation ran to its max new tokens (record metadata `max_new_tokens`). Under a
    thinking budget the answer's own account says (`answer_cut`): the tokens generated count the
    thought too (harness/pipeline/thinking.py)."""
    meta = record.get("metadata") or {}
    if isinstance(meta.get("answer_cut"), bool):
        return meta["answer_cut"]
    limit = meta.get("max_new_tokens")
    if not isinstance(limit, int) or limit <= 0:
        return False
    n = _new_tokens(record, tokenizer)
    return n is not None and n >= limit


@dataclass
class Degenerate:
    """Counts of degenerate predictions among `total` generated records."""

    total: int = 0
    empty: int = 0
    at_max: int = 0
    repeat: int = 0

    def add(self, record: dict, tokenizer=None) -> None:
        pred = record.get("prediction")
        if not isinstance(pred, str):  # loglikelihood and perplexity records have no generation
            return
        self.total += 1
        self.empty += not pred.strip()
        self.at_max += at_max(record, tokenizer)
        self.repeat += bool(pred.strip()) and is_repeating(pred)

    @classmethod
    def of(cls, records: list[dict], tokenizer=None) -> Degenerate:
        d = cls()
        for r in records:
            d.add(r, tokenizer)
        return d

    def shares(self) -> dict | None:
        """{"empty", "at_max", "repeat"} as shares of the predictions, "n" their count; None without any."""
        if not self.total:
            return None
        n = self.total
        return {"empty": self.empty / n, "at_max": self.at_max / n, "repeat": self.repeat / n, "n": n}


def flags(shares: dict | None) -> list[str]:
    """The degenerate kinds at or above FLAG_SHARE, as short words for a table cell. A kind the
    shares list as "expected" (the task's reference behaves so: LongBench's trec runs to its budget,
    Task.runs_to_budget) is not flagged: it is no set-up problem."""
    if not shares:
        return []
    words = {"empty": "empty", "at_max": "max-len", "repeat": "repeats"}
    expected = shares.get("expected") or []
    return [w for k, w in words.items() if shares.get(k, 0) >= FLAG_SHARE and k not in expected]
