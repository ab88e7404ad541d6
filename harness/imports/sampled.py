"""Imported per-sample scores aggregated exactly as our own runs are (harness.pipeline.aggregate).

    block = sampled_block("ruler", cells, block, run)

Each imported sample becomes a record of ours (task, length, index, score, the answer, its prompt
tokens and generated tokens), the imported run is one checkpoint, and aggregation makes the suite's
block: per task and length the mean, its 95% bootstrap interval and the per-sample `samples` block a
leaderboard pairs, the averages over tasks and lengths with theirs, the degenerate answers and the
mean prompt length. A suite whose every cell has samples takes that block whole; in a suite where
only some cells have them, those cells take their statistics and samples from it and the averages
stay the aggregates' (an interval over tasks needs every task's samples).
"""

from __future__ import annotations

from harness.imports.cells import Cell


def records(cells: list[Cell], checkpoint: dict, metric: str) -> list[dict]:
    """Our records of the cells' samples (harness/core/store_schema.py's fields aggregation reads)."""
    out = []
    for c in cells:
        version, dataset_hash = c.sample_key
        for s in c.samples:
            compute = {
                k: v for k, v in (("prompt_tokens", s.prompt_tokens), ("new_tokens", s.new_tokens)) if v is not None
            }
            rec: dict = {
                "type": "sample",
                "checkpoint": checkpoint,
                "task": c.task,
                "task_version": version,
                "length": c.length,
                "index": s.index,
                "seed": None,
                "dataset_hash": dataset_hash,
                "score": s.score,
                "metric": metric,
                "metadata": {"max_new_tokens": c.max_new_tokens} if c.max_new_tokens else {},
            }
            if s.prediction is not None:
                rec["prediction"] = s.prediction
            if compute:
                rec["compute"] = compute
            out.append(rec)
    return out


def sampled_block(suite: str, cells: list[Cell], block: dict, run: dict, categories: dict | None) -> dict:
    """The suite's block with the sampled cells aggregated our way (see the module docstring)."""
    from harness.pipeline.aggregate import aggregate

    sampled = [c for c in cells if c.samples]
    if not sampled:
        return block
    spec: dict = {"tasks": list(block["tasks"]), "excluded": [], "unavailable": {}, "lengths": list(block["lengths"])}
    if block.get("length_controlled") is False:
        spec["length_controlled"] = False
    if categories and len(sampled) == len(cells):
        spec["categories"] = categories
    agg = aggregate(records(sampled, run["checkpoints"][0], f"imported from {run['mode']}"), {suite: spec}, run, {})
    got = agg["suites"][suite]
    if len(sampled) == len(cells):
        return {**got, **{k: block[k] for k in ("imported_protocol",) if k in block}}
    out = dict(block)
    out["per_task"] = {t: dict(by) for t, by in block["per_task"].items()}
    for c in sampled:
        out["per_task"][c.task][str(c.length)] = got["per_task"][c.task][str(c.length)]
    out["samples"] = got.get("samples") or {}
    return out
