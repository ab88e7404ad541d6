"""Result files in each harness's own format, written from that harness's code and docs.

Each writer names the file and commit it follows. They write what the harness writes, in the
folder layout it uses, so `harness import` is tested against the real shapes.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

LM_EVAL_RULER = {  # task -> {length: score as a fraction}
    "niah_single_1": {4096: 1.0, 8192: 0.99},
    "niah_single_2": {4096: 0.98, 8192: 0.96},
    "ruler_vt": {4096: 0.9, 8192: 0.85},
    "ruler_qa_squad": {4096: 0.7, 8192: 0.62},
}


def write_lm_eval(folder: Path) -> Path:
    """An lm-eval `results_<date_id>.json`.

    Source: EleutherAI/lm-evaluation-harness @ 4e7e0d47f33bc71070c1d38394bafbb52b117163
    - lm_eval/evaluator.py (simple_evaluate: results["config"] = {"model", "model_args", "batch_size", ...},
      results["git_hash"], results["date"]; evaluate(): "results", "groups", "group_subtasks", "configs",
      "versions", "n-shot", "higher_is_better", "n-samples" {"original", "effective"});
    - lm_eval/loggers/utils.py add_env_info ("lm_eval_version", "transformers_version", "upper_git_hash")
      and add_tokenizer_info; lm_eval/loggers/evaluation_tracker.py save_results_aggregated
      (`<output_path>/<model_name_sanitized>/results_<date_id>.json`, "model_name", "chat_template");
    - lm_eval/tasks/ruler/niah_single_1.yaml + common_utils.py: one metric per length ("4096", ...),
      filter "none", stderr "N/A", -1 at a length without samples (aggregate_metrics);
    - lm_eval/tasks/babilong/_babilong_common_yaml ("acc") + common_utils.load_dataset (metadata
      max_seq_lengths, "0k" by default); lm_eval/tasks/longbench/narrativeqa.yaml ("score", "qa_f1_score").
    """
    results: dict = {}
    for task, by_len in LM_EVAL_RULER.items():
        entry: dict = {"alias": f" - {task}"}
        for L in (4096, 8192, 16384):
            entry[f"{L},none"] = by_len.get(L, -1)
            entry[f"{L}_stderr,none"] = "N/A"
        results[task] = entry
    results["ruler"] = {"4096,none": 0.895, "4096_stderr,none": "N/A", "alias": "ruler"}
    results["babilong_qa1"] = {"alias": "babilong_qa1", "acc,none": 0.81, "acc_stderr,none": 0.0124}
    results["longbench_narrativeqa"] = {
        "alias": "longbench_narrativeqa",
        "score,none": 0.2412,
        "score_stderr,none": 0.011,
        "qa_f1_score,none": 0.2412,
        "qa_f1_score_stderr,none": 0.011,
    }
    results["mmlu"] = {"alias": "mmlu", "acc,none": 0.66, "acc_stderr,none": 0.003}
    ruler_tasks = list(LM_EVAL_RULER)
    data = {
        "results": results,
        "groups": {"ruler": results["ruler"]},
        "group_subtasks": {"ruler": ruler_tasks, "babilong_qa1": [], "longbench_narrativeqa": [], "mmlu": []},
        "configs": {
            **{
                t: {
                    "task": t,
                    "tag": ["longcxt"],
                    "output_type": "generate_until",
                    "metadata": {
                        "version": 1.0,
                        "max_seq_lengths": [4096, 8192],
                        "pretrained": "meta-llama/Llama-3.1-8B",
                    },
                }
                for t in ruler_tasks
            },
            "babilong_qa1": {
                "task": "babilong_qa1",
                "dataset_path": "RMT-team/babilong-1k-samples",
                "metadata": {"version": 0.0, "max_seq_lengths": "4k"},
            },
            "longbench_narrativeqa": {"task": "longbench_narrativeqa", "metadata": {"version": 5.0}},
            "mmlu": {"task": "mmlu", "metadata": {"version": 2.0}},
        },
        "versions": {**{t: 1.0 for t in ruler_tasks}, "babilong_qa1": 0.0, "longbench_narrativeqa": 5.0, "mmlu": 2.0},
        "n-shot": {t: 0 for t in [*ruler_tasks, "babilong_qa1", "longbench_narrativeqa", "mmlu"]},
        "higher_is_better": {t: {"4096": True, "8192": True} for t in ruler_tasks},
        "n-samples": {
            **{t: {"original": 1000, "effective": 1000} for t in ruler_tasks},
            "babilong_qa1": {"original": 1000, "effective": 1000},
            "longbench_narrativeqa": {"original": 200, "effective": 200},
            "mmlu": {"original": 14042, "effective": 14042},
        },
        "config": {
            "model": "hf",
            "model_args": "pretrained=meta-llama/Llama-3.1-8B,max_length=16384,dtype=bfloat16",
            "model_num_parameters": 8030261248,
            "model_dtype": "torch.bfloat16",
            "model_revision": "main",
            "model_sha": "",
            "batch_size": "1",
            "batch_sizes": [],
            "device": "cuda:0",
            "use_cache": None,
            "limit": None,
            "bootstrap_iters": 100000,
            "gen_kwargs": None,
            "random_seed": 0,
            "numpy_seed": 1234,
            "torch_seed": 1234,
            "fewshot_seed": 1234,
        },
        "git_hash": "4e7e0d4",
        "date": 1741083072.0,
        "pretty_env_info": "PyTorch version: 2.5.1",
        "transformers_version": "4.48.0",
        "lm_eval_version": "0.4.8",
        "upper_git_hash": None,
        "tokenizer_pad_token": ["<|end_of_text|>", "128001"],
        "tokenizer_eos_token": ["<|end_of_text|>", "128001"],
        "tokenizer_bos_token": ["<|begin_of_text|>", "128000"],
        "eot_token_id": 128001,
        "max_length": 16384,
        "task_hashes": {},
        "model_source": "hf",
        "model_name": "meta-llama/Llama-3.1-8B",
        "model_name_sanitized": "meta-llama__Llama-3.1-8B",
        "system_instruction": None,
        "system_instruction_sha": None,
        "fewshot_as_multiturn": False,
        "chat_template": None,
        "chat_template_sha": None,
        "start_time": 1532.1,
        "end_time": 9931.7,
        "total_evaluation_time_seconds": "8399.6",
    }
    path = folder / "meta-llama__Llama-3.1-8B" / "results_2025-03-04T10-11-12.345678.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    return path


RULER_SCORES = {  # length -> task -> (score x100, nulls)
    4096: {"niah_single_1": (100.0, "0/500"), "niah_single_2": (99.8, "0/500"), "vt": (97.12, "1/500")},
    8192: {"niah_single_1": (99.6, "0/500"), "niah_single_2": (98.4, "0/500"), "vt": (93.4, "2/500")},
}


def write_ruler(folder: Path) -> list[Path]:
    """NVIDIA RULER's per-length summary.csv.

    Source: NVIDIA/RULER @ c3f5e3b4f87f97e048793bb510a3a6b19a46bf3a
    - scripts/eval/evaluate.py write_evaluation: pd.DataFrame([["Tasks", *tasks], ["Score", *scores],
      ["Nulls", *"n/N"]]).to_csv(index=False): the first line is the frame's column numbers;
      `summary.csv` for several tasks, `summary-<task>.csv` for one;
    - scripts/run.sh: RESULTS_DIR=${ROOT_DIR}/${MODEL_NAME}/${BENCHMARK}/${MAX_SEQ_LENGTH}, PRED_DIR=.../pred;
    - scripts/eval/synthetic/constants.py: string_match_all/part, x100, rounded to 2 places.
    """
    paths = []
    for L, scores in RULER_SCORES.items():
        pred = folder / "benchmark_root" / "llama3.1-8b-chat" / "synthetic" / str(L) / "pred"
        pred.mkdir(parents=True, exist_ok=True)
        tasks = list(scores)
        rows = [
            list(range(len(tasks) + 1)),
            ["Tasks", *tasks],
            ["Score", *(s for s, _ in scores.values())],
            ["Nulls", *(n for _, n in scores.values())],
        ]
        path = pred / "summary.csv"
        with open(path, "w", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows(rows)
        paths.append(path)
    return paths


HELMET_NAME = "{dataset}_v1_{test}_in{L}_size100_shots2_sampFalsemax{gen}min0t0.0p1.0_chatFalse_42.json"


def write_helmet(folder: Path) -> list[Path]:
    """HELMET's per-dataset outputs.

    Source: princeton-nlp/HELMET @ 4526dfbdc512bd9ff721da336bff4e3e75ecfd27
    - eval.py run_test: output_path `<output_dir>/<dataset>_<tag>_<test_name>_in<L>_size<N>_shots<k>_samp<b>max<G>min<g>t<T>p<P>_chat<b>_<seed>.json`
      holding {"args", "data", "metrics", "averaged_metrics" (mean x100, "_len" keys not), "throughput",
      "memory_usage"}, and `<output_path>.score` = averaged_metrics (not for ALCE);
    - arguments.py: output_dir defaults to output/<basename(model_name_or_path)>;
    - scripts/collect_results.py: dataset_to_metrics (json_kv: substring_exact_match, ruler_niah_mk_2:
      ruler_recall, trec_coarse: exact_match) and configs/recall.yaml, configs/icl.yaml for the names.
    """
    out = folder / "output" / "Llama-3.1-8B"
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    score = {"substring_exact_match": 88.0, "input_len": 130812.4, "output_len": 14.2}
    name = HELMET_NAME.format(dataset="json_kv", test="test_k1800_dep6", L=131072, gen=100)
    (out / (name + ".score")).write_text(json.dumps(score, indent=4))
    paths.append(out / (name + ".score"))
    name = HELMET_NAME.format(dataset="ruler_niah_mk_2", test="validation_131072", L=131072, gen=50)
    (out / (name + ".score")).write_text(json.dumps({"ruler_recall": 97.0, "input_len": 130000.0, "output_len": 9.0}))
    paths.append(out / (name + ".score"))
    # the full output json of an ICL dataset (args + data + averaged_metrics)
    name = HELMET_NAME.format(dataset="icl_trec_coarse_6600shot_balance", test="", L=131072, gen=20)
    full = {
        "args": {
            "dataset": "icl_trec_coarse_6600shot_balance",
            "model_name_or_path": "meta-llama/Llama-3.1-8B",
            "input_max_length": 131072,
            "generation_max_length": 20,
            "max_test_samples": 100,
            "shots": 2,
            "use_chat_template": False,
            "tag": "v1",
            "seed": 42,
        },
        "data": [  # eval.py: {**test_item, **output, **mets}, the metric lists below are these values
            {
                "question": f"q{i}",
                "answer": "DESC",
                "output": "label: DESC" if i != 2 else "label: HUM",
                "input_len": 130000,
                "output_len": 3,
                "exact_match": i != 2,
            }
            for i in range(4)
        ],
        "metrics": {"exact_match": [1.0, 1.0, 0.0, 1.0], "input_len": [130000] * 4, "output_len": [3] * 4},
        "averaged_metrics": {"exact_match": 75.0, "input_len": 130000.0, "output_len": 3.0},
        "throughput": 0.41,
        "memory_usage": 51234567890,
    }
    (out / name).write_text(json.dumps(full, indent=4))
    paths.append(out / name)
    return paths
