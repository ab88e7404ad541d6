"""Prompt and score parity with lm-eval's GraphWalks task, no model needed.

    python benchmarks/graphwalks_parity.py --reference /tmp/ref/lm-evaluation-harness
    python benchmarks/graphwalks_parity.py --reference ... --write-pins tests/graphwalks/parity_pins.json

GraphWalks (hub dataset openai/graphwalks) has no repository of its own: its dataset card gives an
extraction snippet and the F1, and lm-eval's task is the implementation other harnesses port
(NeMo-Skills' checkout has none). The reference run here is lm-eval's own code from a checkout of
EleutherAI/lm-evaluation-harness: lm_eval/tasks/graphwalks/graphwalks_128k.yaml and
graphwalks_1M.yaml loaded by the installed lm_eval's TaskManager (include_path: the checkout's
task folder, no default tasks), so their `!function utils.load_dataset` / `utils.process_results`
are the checkout's utils.py (checked: the functions' file is in the checkout). Only the hub read is
redirected: datasets.load_dataset("openai/graphwalks", data_files=F) reads the fixture file F
(tests/graphwalks/fixtures, the released layout) through datasets' parquet builder. Then:
  - prompts: build_all_requests' Instances, i.e. the context string and generation kwargs lm-eval
    sends for each doc, against our `graphwalks` tasks' sample prompt and max_new_tokens (byte for
    byte, every row of both sets);
  - scores: process_results(doc, [response]) -> f1, flexible_f1 on canned responses per row (the
    answer on the last line, above it, empty, duplicated, with extra nodes, quoted, ...) against
    our graphwalks_* (f1) and graphwalks_flexible_* (flexible_f1) tasks' score();
  - headline: the graphwalks group (graphwalks.yaml: weight_by_size) by lm_eval's
    aggregate_subtask_metrics over the two tasks' means, against our Headline's sample-pooled
    Overall, per response case (equal within 1e-12: the sums run in another order).
Pins (--write-pins) hold the reference's side so tests/graphwalks/test_parity_pins.py checks ours
without the checkout.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "benchmarks"))  # parity_kit.py beside this script, imported by name

from parity_kit import mismatch_status, sha, write_json  # after the sys.path lines above

DATA = ROOT / "tests" / "graphwalks" / "fixtures"
TASK_DIR = Path("lm_eval") / "tasks" / "graphwalks"
REF_TASKS = {"graphwalks_128k": "128k", "graphwalks_1M": "1m"}
LENGTH = 131072  # every fixture row fits it with 16384 to generate
EXTRA = ["deadbeef00", "0123456789"]


def _final(nodes: list[str]) -> str:
    return f"Final Answer: [{', '.join(nodes)}]"


# canned responses from the gold nodes: (case name, response)
CASES = {
    "last_line": lambda g: _final(g),
    "reasoning_then_last_line": lambda g: f"The parents are listed below.\n{_final(g)}",
    "not_last_line": lambda g: f"{_final(g)}\n\nI traced every edge to get this.",
    "empty": lambda g: "",
    "no_marker": lambda g: ", ".join(g),
    "duplicates": lambda g: _final(g + g),
    "extra_nodes": lambda g: _final(g + EXTRA),
    "half": lambda g: _final(g[: len(g) // 2]),
    "quoted": lambda g: "Final Answer: [" + ", ".join(f"'{n}'" for n in g) + "]",
    "trailing_newlines": lambda g: _final(g) + "\n\n\n",
    "crlf": lambda g: _final(g) + "\r\n",
    "no_brackets": lambda g: "Final Answer: " + ", ".join(g),
    "lowercase_marker": lambda g: _final(g).lower(),
    "no_space": lambda g: "Final Answer:[" + ",".join(g) + "]",
    "empty_list": lambda g: "Final Answer: []",
    "two_answers": lambda g: f"Final Answer: [{EXTRA[0]}]\nWait, let me redo it.\n{_final(g)}\nDone.",
    "nested_brackets": lambda g: "Final Answer: [[" + ", ".join(g) + "]]",
}


def reference_tasks(checkout: Path, data: Path) -> dict:
    """lm-eval's graphwalks_128k and graphwalks_1M, built by its TaskManager from the checkout."""
    import datasets
    from lm_eval.tasks import TaskManager

    folder = checkout / TASK_DIR
    if not (folder / "utils.py").is_file():
        sys.exit(
            f"error: {folder / 'utils.py'} not found: pass --reference, a checkout of EleutherAI/lm-evaluation-harness"
        )
    original = datasets.load_dataset

    def fixture_load(path, *args, data_files=None, split=None, **kwargs):
        assert path == "openai/graphwalks" and not args and not kwargs, (path, args, kwargs)
        return original("parquet", data_files=str(data / data_files), split=split)

    datasets.load_dataset = fixture_load
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            manager = TaskManager(include_path=str(folder), include_defaults=False)
            tasks = manager.load_task_or_group(list(REF_TASKS))
    finally:
        datasets.load_dataset = original
    for task in tasks.values():  # the checkout's functions, not the installed package's copy
        assert Path(task.config.process_results.__code__.co_filename).resolve() == (folder / "utils.py").resolve()
    return tasks


def reference_requests(task) -> list[tuple[str, dict]]:
    """(context, generation kwargs) lm-eval sends for each doc, in doc order."""
    task.build_all_requests(limit=None, rank=0, world_size=1)
    instances = sorted(task.instances, key=lambda ins: ins.doc_id)
    return [(ins.arguments[0], ins.arguments[1]) for ins in instances]


def our_samples(tok) -> dict[tuple[str, int], dict]:
    """(set, row) -> {task name: sample} for our f1 and flexible_f1 tasks."""
    from tasks.graphwalks.tasks import RELEASED, GraphWalksReleased
    from tasks.registry import get_task

    out: dict[tuple[str, int], dict] = {}
    for name in RELEASED["graphwalks"] + RELEASED["graphwalks-flexible"]:
        task = get_task(name)
        assert isinstance(task, GraphWalksReleased)
        task.set_protocol("reference")
        for index in range(task.num_samples_with_tokenizer(LENGTH, tok)):
            s = task.sample(LENGTH, index, 0, tok)
            out.setdefault((task.released_set, s.metadata["row"]), {})[name] = (task, s)
    return out


def _compare_prompts(label: str, requests: list, ours: dict) -> tuple[list[dict], int]:
    cases, bad = [], 0
    for row, (context, kwargs) in enumerate(requests):
        pair = ours[(label, row)]
        (_, strict), (_, loose) = sorted(pair.values(), key=lambda ts: ts[0].flexible)
        same = context == strict.prompt == loose.prompt and kwargs["max_gen_toks"] == strict.max_new_tokens
        bad += not same
        cases.append({"set": label, "row": row, "prompt_sha256": sha(context), "max_gen_toks": kwargs["max_gen_toks"]})
    return cases, bad


def _compare_scores(label: str, task, docs: list, ours: dict, mine_out: list) -> tuple[list[dict], int]:
    """The reference's f1 / flexible_f1 per row and case (pinned); ours go to `mine_out`."""
    scores, bad = [], 0
    for row, doc in enumerate(docs):
        pair = sorted(ours[(label, row)].values(), key=lambda ts: ts[0].flexible)
        for case, make in CASES.items():
            response = make(list(doc["answer_nodes"]))
            ref = task.process_results(doc, [response])
            mine = [t.score(response, s) for t, s in pair]
            bad += mine != [ref["f1"], ref["flexible_f1"]]
            mine_out.append({"set": label, "case": case, "f1": mine[0], "flexible_f1": mine[1]})
            scores.append(
                {
                    "set": label,
                    "row": row,
                    "case": case,
                    "response": response,
                    **{k: ref[k] for k in ("f1", "flexible_f1")},
                }
            )
    return scores, bad


def our_headline(mine: list[dict], case: str, metric: str) -> float:
    """Our suite's Overall for one response case: the mean over the samples of its tasks (Headline
    weighting "samples"), f1 from the graphwalks suite, flexible_f1 from graphwalks-flexible."""
    pooled = [p[metric] for p in mine if p["case"] == case]
    return sum(pooled) / len(pooled)


def _headlines(scores: list[dict], mine: list[dict], sizes: dict[str, int]) -> tuple[list[dict], int]:
    """The graphwalks group per case and metric: lm_eval's weight_by_size aggregate vs our pooled mean."""
    from lm_eval.api.metrics import aggregate_subtask_metrics, mean

    out, bad = [], 0
    for case in CASES:
        for metric in ("f1", "flexible_f1"):
            per_set = {lab: [p[metric] for p in scores if p["case"] == case and p["set"] == lab] for lab in sizes}
            ref = aggregate_subtask_metrics([mean(v) for v in per_set.values()], list(sizes.values()), True)
            mine_value = our_headline(mine, case, metric)
            bad += abs(mine_value - ref) > 1e-12
            out.append({"case": case, "metric": metric, "reference": ref})
    return out, bad


def compare(checkout: Path, data: Path, tok) -> dict:
    from tasks.graphwalks import data as gw_data

    gw_data.clear_cache()
    ours = our_samples(tok)
    tasks = reference_tasks(checkout, data)
    cases: list[dict] = []
    scores: list[dict] = []
    mine: list[dict] = []
    sizes: dict[str, int] = {}
    prompt_bad = score_bad = 0
    for ref_name, label in REF_TASKS.items():
        task = tasks[ref_name]
        docs = list(task.test_docs())
        sizes[label] = len(docs)
        got, bad = _compare_prompts(label, reference_requests(task), ours)
        cases, prompt_bad = cases + got, prompt_bad + bad
        got, bad = _compare_scores(label, task, docs, ours, mine)
        scores, score_bad = scores + got, score_bad + bad
    headlines, head_bad = _headlines(scores, mine, sizes)
    unmatched = len(ours) - len(cases)  # rows we built that lm-eval has no doc for
    totals = {
        "prompts_compared": len(cases),
        "scores_compared": 2 * len(scores),
        "headlines_compared": len(headlines),
        "prompt_mismatches": prompt_bad + abs(unmatched),
        "score_mismatches": score_bad,
        "headline_mismatches": head_bad,
    }
    return {"cases": cases, "scores": scores, "headlines": headlines, "totals": totals}


def _source(checkout: Path, commit: str | None) -> dict:
    folder = checkout / TASK_DIR
    files = sorted(p.name for p in folder.iterdir() if p.suffix in (".py", ".yaml"))
    return {
        "reference": "EleutherAI/lm-evaluation-harness lm_eval/tasks/graphwalks (run by lm_eval's TaskManager)",
        "commit": commit,
        "files_sha256": {f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in files},
        "data": "tests/graphwalks/fixtures (openai/graphwalks layout)",
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reference", required=True, type=Path, help="a checkout of EleutherAI/lm-evaluation-harness")
    p.add_argument("--commit", help="the checkout's commit, recorded in the pins")
    p.add_argument("--data", type=Path, default=DATA, help="a folder of the released parquet files")
    p.add_argument("--write-pins", type=Path, help="write the reference's side here (JSON)")
    args = p.parse_args(argv)
    import os

    os.environ["HARNESS_GRAPHWALKS"] = str(args.data.resolve())
    from harness.models.embedded import build_tokenizer
    from harness.models.tokenization import load_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        tok = load_tokenizer(str(build_tokenizer(Path(tmp))))
        result = compare(args.reference, args.data.resolve(), tok)
    print(json.dumps(result["totals"], indent=1))
    if args.write_pins:
        write_json(args.write_pins, {"_source": _source(args.reference, args.commit), **result})
    return mismatch_status(result["totals"])


if __name__ == "__main__":
    sys.exit(main())
