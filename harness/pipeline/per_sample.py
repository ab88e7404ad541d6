"""Per-sample facts gathered in aggregation's one pass over the records.

    collected = PerSample()
    for r in counted_records: collected.add(r, fingerprint)
    per = collected.finish(ckpts, labels)     # {"blocks", "reps", "depth", "seconds", "degenerate"}

What results.json keeps beside the averages: each cell's per-sample scores (`samples` blocks,
harness/core/paired.py, which a leaderboard pairs across runs) and their bootstrap replicates, the
needles' hits by depth (harness.pipeline.depth_heatmap), the evaluation seconds (the provenance
`throughput`) and the degenerate predictions (empty, ran to max new tokens, looping).
"""

from __future__ import annotations

from harness.core.degenerate import Degenerate
from harness.core.paired import cell_replicates, is_perplexity
from harness.pipeline.depth_heatmap import NeedleHits


class PerSample:
    """Per-sample scores, needle hits by depth, evaluation seconds and degenerate predictions."""

    def __init__(self) -> None:
        self.cells: dict[tuple, dict] = {}
        self.needles = NeedleHits()
        self.seconds: dict[tuple, list] = {}  # (task, L) -> [seconds, samples]
        self.total_seconds = 0.0
        self.total_samples = 0
        self.degenerate: dict[tuple, Degenerate] = {}  # (task, L) -> degenerate predictions, all checkpoints
        # (task, L) -> [thoughts closed at the thinking budget, answers that reached theirs, records]
        self.budget: dict[tuple, list[int]] = {}
        self.prompts: dict[tuple, list] = {}  # (task, L) -> [prompt tokens summed, records counted, records]

    def add(self, r: dict, fp: str) -> None:
        task, L, meta = r["task"], int(r["length"]), r.get("metadata") or {}
        c = self.cells.setdefault(
            (task, L),
            {"task_version": r["task_version"], "dataset_hash": r.get("dataset_hash"), "seed": r["seed"], "by": {}},
        )
        for field in ("task_version", "dataset_hash", "seed"):  # a cell mixing generators pairs with nothing
            if c[field] != r.get(field) and not str(c[field]).startswith("mixed"):
                c[field] = f"mixed: {c[field]}, {r.get(field)}"
        entry = {"score": float(r["score"])}
        if "nll" in meta and "tokens" in meta:
            entry.update(nll=float(meta["nll"]), tokens=int(meta["tokens"]))
        c["by"].setdefault(fp, {})[int(r["index"])] = entry
        self.degenerate.setdefault((task, L), Degenerate()).add(r)
        if isinstance(meta.get("thinking_cut"), bool):  # a thinking budget's account (harness/pipeline/thinking.py)
            cut = self.budget.setdefault((task, L), [0, 0, 0])
            cut[0] += meta["thinking_cut"]
            cut[1] += bool(meta.get("answer_cut"))
            cut[2] += 1
        prompt = (r.get("compute") or {}).get("prompt_tokens") if isinstance(r.get("compute"), dict) else None
        acc = self.prompts.setdefault((task, L), [0, 0, 0])
        acc[2] += 1
        if isinstance(prompt, int) and not isinstance(prompt, bool) and prompt > 0:
            acc[0] += prompt
            acc[1] += 1
        self.needles.add(r, fp)
        secs = r.get("eval_seconds")
        if isinstance(secs, (int, float)) and secs >= 0:
            acc = self.seconds.setdefault((task, L), [0.0, 0])
            acc[0] += float(secs)
            acc[1] += 1
            self.total_seconds += float(secs)
            self.total_samples += 1

    def finish(self, ckpts: list[dict], labels: dict[str, str]) -> dict:
        blocks, reps = {}, {}
        for (task, L), c in self.cells.items():
            index = sorted({i for by in c["by"].values() for i in by})
            block = {k: c[k] for k in ("task_version", "dataset_hash", "seed")}
            block["index"] = index
            ppl = all("nll" in e for by in c["by"].values() for e in by.values())
            fields = ("nll", "tokens") if ppl else ("score",)
            for field in fields:
                block["scores" if field == "score" else field] = {
                    labels[fp]: [_num(by[i][field]) if i in by else None for i in index]
                    for fp, by in ((ck["fingerprint"], c["by"].get(ck["fingerprint"])) for ck in ckpts)
                    if by is not None
                }
            blocks[(task, L)] = block
            reps[(task, L)] = cell_replicates(task, L, block, [labels[ck["fingerprint"]] for ck in ckpts])
            assert is_perplexity(block) == ppl
        degenerate = {k: sh for k, d in self.degenerate.items() if (sh := d.shares()) is not None}
        for (task, _), sh in degenerate.items():
            if _runs_to_budget(task):
                sh["expected"] = ["at_max"]
        return {
            "blocks": blocks,
            "reps": reps,
            "depth": self.needles.bins,
            "seconds": self.seconds,
            "degenerate": degenerate,
            "budget": {k: {"thinking_cut": t, "answer_cut": a, "n": n} for k, (t, a, n) in self.budget.items()},
            # the mean prompt length of a cell whose every record counted its prompt tokens
            "prompt_tokens": {k: s / n for k, (s, n, total) in self.prompts.items() if n and n == total},
        }

    def throughput(self) -> dict | None:
        """The provenance `throughput` of the records that carry `eval_seconds` (None when none do)."""
        if self.total_seconds <= 0:
            return None
        return {
            "samples_per_s": self.total_samples / self.total_seconds,
            "samples": self.total_samples,
            "seconds": self.total_seconds,
            "note": "samples evaluated per second of one checkpoint's evaluation (all checkpoints pooled)",
            # timings live here, not in the scores: a re-run or a parallel run scores the same, times differ
            "seconds_per_sample": {
                t: {str(L): s / n for (t2, L), (s, n) in sorted(self.seconds.items()) if t2 == t}
                for t in sorted({t for t, _ in self.seconds})
            },
        }

    def run_degenerate(self) -> dict | None:
        """The shares of degenerate predictions over the whole run (None when nothing was generated):
        "all empty" is said in the report's last line."""
        whole = Degenerate()
        for (task, _), d in self.degenerate.items():
            whole.total += d.total
            whole.empty += d.empty
            whole.at_max += 0 if _runs_to_budget(task) else d.at_max  # its reference runs to the budget too
            whole.repeat += d.repeat
        return whole.shares()


def _runs_to_budget(task: str) -> bool:
    """Whether the task's reference runs its answers to max new tokens (Task.runs_to_budget)."""
    from tasks.registry import all_tasks

    cls = all_tasks().get(task)
    return bool(getattr(cls, "runs_to_budget", False))


def _num(v: float) -> float:
    """Scores kept to 6 decimals (their exact fractions do not need more), token counts as ints."""
    return v if isinstance(v, int) else round(float(v), 6)
