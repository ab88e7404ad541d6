"""Per-sample result files of lm-eval, NVIDIA RULER and HELMET, in each harness's own format, for
the comparison of issue 50: SmolLM2-135M-Instruct on niah_single_1, niah_multikey_1 and vt at 1K and
2K, 25 samples each, beside a run of ours on the same tasks (`our_run`).

Each writer names the code it follows. The answers are drawn from a seeded RNG at a fixed hit rate
per task and length; the per-sample files and the summary files agree, as the harnesses write them.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import random
from pathlib import Path

MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
LENGTHS = [1024, 2048]
N = 25
# task -> length -> (hits out of N, mean prompt tokens of the tool): lm-eval's port fills less of L
LM_EVAL = {
    "niah_single_1": {1024: (20, 801), 2048: (19, 1650)},
    "niah_multikey_1": {1024: (14, 752), 2048: (11, 1393)},
    "ruler_vt": {1024: (9, 941), 2048: (6, 1880)},
}
RULER = {  # NVIDIA's pipeline fills L - tokens_to_generate
    "niah_single_1": {1024: (25, 896), 2048: (25, 1920)},
    "niah_multikey_1": {1024: (17, 896), 2048: (15, 1920)},
    "vt": {1024: (2, 994), 2048: (2, 2018)},
}
OURS = {
    "niah_single_1": {1024: (25, 896), 2048: (24, 1920)},
    "niah_multikey_1": {1024: (16, 896), 2048: (14, 1920)},
    "vt": {1024: (3, 994), 2048: (2, 2018)},
}
BUDGET = {"niah_single_1": 128, "niah_multikey_1": 128, "ruler_vt": 30, "vt": 30}


def _hits(seed: str, k: int) -> list[bool]:
    """k hits among N, at seeded positions."""
    rng = random.Random(seed)
    pos = set(rng.sample(range(N), k))
    return [i in pos for i in range(N)]


def _needle(task: str, L: int, i: int) -> str:
    return str(1000000 + int(hashlib.sha256(f"{task}{L}{i}".encode()).hexdigest()[:6], 16) % 9000000)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write_lm_eval(folder: Path, longbench_trec: bool = False) -> Path:
    """`lm_eval --model hf --model_args pretrained=...,dtype=float32 --tasks niah_single_1,niah_multikey_1,
    ruler_vt --metadata '{"max_seq_lengths":[1024,2048]}' --log_samples --output_path folder`.

    Source: EleutherAI/lm-evaluation-harness @ 4e7e0d47f33bc71070c1d38394bafbb52b117163
    - lm_eval/evaluator.py evaluate(): a logged sample {"doc_id", "doc", "target", "arguments", "resps",
      "filtered_resps", "filter", "metrics", "doc_hash", "prompt_hash", "target_hash", **metrics};
    - lm_eval/loggers/evaluation_tracker.py save_results_samples: `samples_<task>_<date_id>.jsonl` beside
      `results_<date_id>.json`, arguments as {"gen_args_0": {"arg_0": prompt, "arg_1": gen_kwargs}};
    - lm_eval/tasks/ruler/common_utils.py process_results: {"4096": -1.0, str(doc["max_length"]): score}
      (DEFAULT_SEQ_LENGTHS = [4096]); a length outside the yaml's metric_list is aggregated by mean,
      with mean_stderr (evaluator_utils / api/metrics.py), 4096 by aggregate_metrics with "N/A";
    - prepare_niah.generate_samples: doc {"index", "input", "outputs", "length" (input tokens + 128),
      "max_length", "gen_prefix"}; the docs of all lengths in one dataset, so doc_id runs on.
    """
    date = "2026-11-20T10-11-12.345678"
    out = folder / "HuggingFaceTB__SmolLM2-135M-Instruct"
    out.mkdir(parents=True, exist_ok=True)
    results: dict = {}
    for task, by_len in LM_EVAL.items():
        lines, entry = [], {"alias": f" - {task}", "4096,none": -1, "4096_stderr,none": "N/A"}
        for j, L in enumerate(LENGTHS):
            k, prompt = by_len[L]
            hits = _hits(f"lm-eval{task}{L}", k)
            scores = [1.0 if h else 0.0 for h in hits]
            lines += [_lm_eval_line(task, L, j * N + i, i, hit, prompt) for i, hit in enumerate(hits)]
            mean = sum(scores) / N
            sd = math.sqrt(sum((x - mean) ** 2 for x in scores) / (N - 1))
            entry[f"{L},none"] = mean
            entry[f"{L}_stderr,none"] = sd / math.sqrt(N)
        results[task] = entry
        path = out / f"samples_{task}_{date}.jsonl"
        path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    if longbench_trec:
        _lm_eval_trec(out, date, results)
    data = {
        "results": results,
        "group_subtasks": {t: [] for t in results},
        "configs": {t: {"task": t, "metadata": {"version": 1.0, "max_seq_lengths": LENGTHS}} for t in LM_EVAL},
        "versions": {t: 1.0 for t in results},
        "n-samples": {t: {"original": N * 2, "effective": N * 2} for t in LM_EVAL},
        "config": {
            "model": "hf",
            "model_args": f"pretrained={MODEL},dtype=float32",
            "model_dtype": "torch.float32",
            "batch_size": "1",
            "random_seed": 0,
        },
        "git_hash": "4e7e0d4",
        "date": 1763633472.0,
        "transformers_version": "4.57.1",
        "lm_eval_version": "0.4.9.1",
        "max_length": 8192,
        "model_name": MODEL,
        "chat_template": None,
    }
    path = out / f"results_{date}.json"
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False))
    return path


def _lm_eval_line(task: str, L: int, doc_id: int, i: int, hit: bool, prompt: int) -> dict:
    """One logged sample of lm-eval's RULER port (its doc as prepare_niah.generate_samples makes it)."""
    needle = _needle(task, L, i)
    doc = {
        "index": i,
        "input": f"Some special magic numbers are hidden... {needle} ... What is the special magic number?",
        "outputs": [needle],
        "length": prompt + (i % 5) - 2 + BUDGET[task],
        "max_length": L,
        "gen_prefix": "The special magic number for X mentioned in the provided text is",
    }
    answer = f" {needle}." if hit else " 42."
    return {
        "doc_id": doc_id,
        "doc": doc,
        "target": str([needle]),
        "arguments": {"gen_args_0": {"arg_0": doc["input"], "arg_1": {"max_gen_toks": BUDGET[task], "until": []}}},
        "resps": [[answer]],
        "filtered_resps": [answer],
        "filter": "none",
        "metrics": ["4096", str(L)],
        "doc_hash": _sha(json.dumps(doc, indent=2, ensure_ascii=False)),
        "prompt_hash": _sha(doc["input"]),
        "target_hash": _sha(str([needle])),
        "4096": -1.0,
        str(L): 1.0 if hit else 0.0,
    }


def _lm_eval_trec(out: Path, date: str, results: dict) -> None:
    """longbench_trec (lm_eval/tasks/longbench/trec.yaml: metric "score", aggregation mean, max_gen_toks 64)."""
    hits = _hits("lm-eval-trec", 15)
    lines = [
        {
            "doc_id": i,
            "doc": {"input": f"question {i}", "context": "...", "answers": ["LOC"], "length": 5000 + i},
            "target": "['LOC']",
            "arguments": {"gen_args_0": {"arg_0": f"question {i}", "arg_1": {"max_gen_toks": 64, "until": ["\n"]}}},
            "resps": [["LOC" if h else "HUM"]],
            "filtered_resps": ["LOC" if h else "HUM"],
            "filter": "none",
            "metrics": ["score", "classification_score"],
            "doc_hash": _sha(f"trec{i}"),
            "prompt_hash": _sha(f"question {i}"),
            "target_hash": _sha("['LOC']"),
            "score": 1.0 if h else 0.0,
            "classification_score": 1.0 if h else 0.0,
        }
        for i, h in enumerate(hits)
    ]
    (out / f"samples_longbench_trec_{date}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    mean = sum(hits) / N
    results["longbench_trec"] = {"alias": "longbench_trec", "score,none": mean, "score_stderr,none": 0.1}


def write_ruler(folder: Path) -> list[Path]:
    """NVIDIA RULER's pred folder per length: `<task>.jsonl` predictions and the summary.csv of them.

    Source: NVIDIA/RULER @ c3f5e3b4f87f97e048793bb510a3a6b19a46bf3a
    - scripts/pred/call_api.py: one line per sample {"index", "pred", "input", "outputs", "others",
      "truncation", "length"} in <save_dir>/<task>.jsonl;
    - scripts/data/synthetic/niah.py: "length" = input tokens (answer prefix in) + tokens_to_generate,
      "index" overwritten with the needle's character position;
    - scripts/eval/evaluate.py + synthetic/constants.py: string_match_all x100 rounded to 2 places,
      Nulls "empty/total", summary.csv written by pandas with index=False.
    """
    paths = []
    for L in LENGTHS:
        pred = folder / "benchmark_root" / "SmolLM2-135M-Instruct" / "synthetic" / str(L) / "pred"
        pred.mkdir(parents=True, exist_ok=True)
        scores, nulls = [], []
        for task, by_len in RULER.items():
            k, prompt = by_len[L]
            hits = _hits(f"ruler{task}{L}", k)
            rows = []
            for i, hit in enumerate(hits):
                needle = _needle(task, L, i)
                text = f"A special magic number is hidden ... {needle} ... What is it?"
                rows.append(
                    {
                        "index": text.find(needle),
                        "pred": f" {needle}\n" if hit else " I don't know",
                        "input": text,
                        "outputs": [needle],
                        "others": {},
                        "truncation": -1,
                        "length": prompt + BUDGET[task],
                    }
                )
            (pred / f"{task}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            scores.append(round(100 * k / N, 2))
            nulls.append(f"0/{N}")
        path = pred / "summary.csv"
        with open(path, "w", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows(
                [list(range(len(RULER) + 1)), ["Tasks", *RULER], ["Score", *scores], ["Nulls", *nulls]]
            )
        paths.append(path)
    return paths


HELMET_RULER = {"ruler_niah_s_1": "niah_single_1", "ruler_niah_mk_1": "niah_multikey_1", "ruler_vt": "vt"}


def write_helmet(folder: Path) -> list[Path]:
    """HELMET's output json per dataset and length (with its per-sample "data") and its .json.score.

    Source: princeton-nlp/HELMET @ 4526dfbdc512bd9ff721da336bff4e3e75ecfd27
    - eval.py run_test: {"args", "data": [{**test_item, **output, **metrics}], "metrics" (per-sample
      lists), "averaged_metrics" (mean x100; "_len" keys plain), "throughput"} and the .score file;
      output = model_utils generate's {"output", "input_len", "output_len"} plus "parsed_output";
    - data.py load_ruler post_process: {"ruler_recall": share of the answers in the output};
    - configs/ruler.yaml: datasets ruler_niah_s_1, ruler_niah_mk_1, ruler_vt; generation_max_length 50.
    """
    out = folder / "output" / "SmolLM2-135M-Instruct"
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for dataset, task in HELMET_RULER.items():
        for L in LENGTHS:
            k, prompt = RULER[task][L]
            hits = _hits(f"helmet{task}{L}", k)
            data = []
            for i, hit in enumerate(hits):
                needle = _needle(task, L, i)
                output = needle if hit else "the grass is green " * 12
                data.append(
                    {
                        "index": i,
                        "question": f"What is the special magic number for key-{i}?",
                        "answer": [needle],
                        "output": output,
                        "input_len": prompt - 3 + (i % 3),
                        "output_len": 7 if hit else 50,
                        "parsed_output": output,
                        "ruler_recall": 1.0 if hit else 0.0,
                    }
                )
            name = f"{dataset}_eval_validation_{L}_in{L}_size{N}_shots0_sampFalsemax50min0t0.0p1.0_chatFalse_42.json"
            metrics = {
                "ruler_recall": [d["ruler_recall"] for d in data],
                "input_len": [d["input_len"] for d in data],
                "output_len": [d["output_len"] for d in data],
            }
            averaged = {key: sum(v) / len(v) * (1 if "_len" in key else 100) for key, v in metrics.items()}
            args = {
                "dataset": dataset,
                "tag": "eval",
                "model_name_or_path": MODEL,
                "input_max_length": L,
                "generation_max_length": 50,
                "max_test_samples": N,
                "use_chat_template": False,
                "seed": 42,
                "no_bf16": True,
            }
            body = {"args": args, "data": data, "metrics": metrics, "averaged_metrics": averaged, "throughput": 3.1}
            (out / name).write_text(json.dumps(body, indent=4))
            (out / (name + ".score")).write_text(json.dumps(averaged, indent=4))
            paths.append(out / (name + ".score"))
    return paths


def our_records(run: str = "smollm2-ours") -> tuple[list[dict], dict, dict]:
    """(records, suites, run) of `harness eval --tasks niah_single_1,niah_multikey_1,vt --lengths 1k,2k
    --samples 25` on SmolLM2 (one checkpoint, suite "custom"), each record counting its prompt tokens."""
    ckpt = {"path": "models/SmolLM2-135M-Instruct", "step": None, "fingerprint": "fp-smollm2", "training": None}
    recs = []
    for task, by_len in OURS.items():
        for L in LENGTHS:
            k, prompt = by_len[L]
            for i, hit in enumerate(_hits(f"ours{task}{L}", k)):
                recs.append(
                    {
                        "type": "sample",
                        "run": run,
                        "checkpoint": ckpt,
                        "task": task,
                        "task_version": "1",
                        "length": L,
                        "index": i,
                        "seed": 42,
                        "dataset_hash": "",
                        "score": 1.0 if hit else 0.0,
                        "metric": "string_match_all",
                        "prediction": "8175093" if hit else "I do not know",
                        "metadata": {"max_new_tokens": BUDGET[task]},
                        "compute": {"prompt_tokens": prompt, "new_tokens": 5},
                    }
                )
    suites = {"custom": {"tasks": list(OURS), "excluded": [], "unavailable": {}, "lengths": LENGTHS}}
    info = {"name": run, "model": ckpt["path"], "mode": "eval", "checkpoints": [ckpt]}
    return recs, suites, info


def trec_records(ckpt: dict, run: str, budget: int = 8192) -> list[dict]:
    """`harness eval --tasks trec` (LongBench, the reference protocol: 64 new tokens, scored on the
    first line): a base model goes on after its label, so every answer runs to the 64 tokens, as
    under LongBench's pred.py; "!max-len" would be a false alarm."""
    hits = _hits("ours-trec", 16)
    return [
        {
            "type": "sample",
            "run": run,
            "checkpoint": ckpt,
            "task": "trec",
            "task_version": "2",
            "length": budget,
            "index": i,
            "seed": 42,
            "dataset_hash": "lb-trec",
            "score": 1.0 if hit else 0.0,
            "metric": "classification_score",
            "prediction": (
                "Location\nQuestion: who wrote it?\nType: Human" if hit else "Human\nQuestion: where\nType: Loc"
            ),
            "metadata": {"max_new_tokens": 64},
            "compute": {"prompt_tokens": 5012 + i, "new_tokens": 64},
        }
        for i, hit in enumerate(hits)
    ]


def write_our_run(folder: Path, trec: bool = False) -> Path:
    """Our run's results.json (aggregated as `harness eval` does); with LongBench's trec among the tasks."""
    from harness.core.results_file import write_results
    from harness.pipeline.aggregate import aggregate

    recs, suites, info = our_records()
    if trec:
        recs += trec_records(info["checkpoints"][0], info["name"])
        suites = {"custom": {**suites["custom"], "tasks": [*OURS, "trec"], "lengths": [*LENGTHS, 8192]}}
    provenance = {"package_version": "0.1.0", "git_hash": "abc1234", "backend": "hf", "dtype": "float32"}
    path = folder / "results.json"
    write_results(path, aggregate(recs, suites, info, provenance))
    return path
