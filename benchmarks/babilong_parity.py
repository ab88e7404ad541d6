"""Parity with booydar/babilong's own code: prompts, token ids and scores on released-layout files.

    python benchmarks/babilong_parity.py --reference /tmp/ref/babilong                      # the committed fixtures
    python benchmarks/babilong_parity.py --reference ... --data DIR --tokenizer smollm2-135m-instruct
    python benchmarks/babilong_parity.py --reference ... --pin tests/babilong/parity_pins.json

--reference is a checkout of https://github.com/booydar/babilong (7a6efee checked; its babilong/
package needs nothing beyond pandas). --data is a folder of released sets: RMT-team/babilong
(data/qaN/<length>.json) and/or RMT-team/babilong-1k-samples (<length>/qaN-*.parquet), each in a
subfolder or DIR itself; by default tests/babilong/released (written by tests/babilong/helpers.py).

Reference side, as scripts/run_model_on_babilong.py runs: each file is read with `datasets` as the
hub's dataset card maps it (`load_dataset("json"|"parquet", data_files={task: files})[task]`), each
row put through babilong.prompts.get_formatted_input with the task's instruction, examples and
post_prompt (--use_instruction --use_examples --use_post_prompt, the leaderboard's configuration),
tokenized as its HF path does: `tokenizer(text, add_special_tokens=True)`, or with
--use_chat_template `apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)`
(no system turn on that path). Each prediction is stored as it stores them (a DataFrame row
[target, output, question], to_csv), read back as collect_results.get_model_results reads them
(read_csv, astype(str) for a non-object column, fillna("")) and scored with babilong.metrics.
compare_answers and TASK_LABELS (collect_results.py itself imports matplotlib, seaborn and IPython,
so those few lines are repeated here).

Our side: `babilong_qaN` under the "reference" protocol, at the label's length, every row
(Task.default_samples), the token ids as `harness eval` sends them (harness.models.runners.common.prompt_ids;
under --chat harness.pipeline.reasoning.chat_prompt with the reference protocol's system turn: none), and
Task.score on the same predictions.

Printed per set, task and length: rows on each side, prompt text mismatches, token id mismatches
without and with the chat template, score mismatches out of the predictions scored. Exit 1 on any
mismatch. --pin writes what tests/babilong/test_parity.py checks without the checkout: per file,
each reference prompt's sha256, the predictions and the reference's verdicts.

With --model, both pipelines also run a real model on one released set (--data: a set folder):

    python benchmarks/babilong_parity.py --reference /tmp/ref/babilong --model smollm2-135m-instruct \
        --data DIR --tasks qa1,qa2,qa3,qa4,qa5 --samples 10 --out runs/babilong-parity [--chat]

The set's first --samples rows of each file are copied to <out>/data with the README.md dataset
card the hub has (its `configs`), so the reference's `datasets.load_dataset(DIR, length)[task]`
reads them as it reads the hub. The reference runs scripts/run_model_on_babilong.py unmodified
(HF path: bfloat16, or float32 with --dtype float32, greedy, 20 new tokens, --use_instruction --use_examples --use_post_prompt
[--use_chat_template]) beside a sitecustomize.py that gives it the transformers 4 behaviour it was
written for: a missing flash-attn raises ValueError (which its loader catches, loading with the
default attention) and apply_chat_template(tokenize=True) returns the ids, not a BatchEncoding.
Ours runs `harness eval --suite babilong --dtype bfloat16` on the same folder. A model given as a
.gguf file or a packaged name is dequantized once into <out>/model, which both sides load.
Printed per task and length: both accuracies, identical predictions, and the 95% interval of the
paired difference (bootstrap over rows).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "benchmarks"))  # parity_kit.py beside this script, imported by name

from parity_kit import BenchError, sha, write_json  # after the sys.path lines above

from tasks.babilong import released  # after the sys.path line above

# A ChatML template that writes BOS itself (as Llama-2's and Mistral's do), for tokenizers without one.
CHATML = (
    "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SEED = 42


def load_reference(path: Path):
    """The reference's own prompt and metric modules, imported from the checkout."""
    if not (path / "babilong" / "prompts.py").is_file() or not (path / "babilong" / "metrics.py").is_file():
        raise BenchError(f"{path} is not a checkout of booydar/babilong (no babilong/prompts.py, babilong/metrics.py)")
    sys.path.insert(0, str(path))
    return importlib.import_module("babilong.prompts"), importlib.import_module("babilong.metrics")


def set_dirs(data: Path) -> list[Path]:
    """data itself when it holds a released set, else each subfolder that does."""
    found = [data] if released.layout(str(data)) else []
    found += [d for d in sorted(data.iterdir()) if d.is_dir() and not found and released.layout(str(d))]
    if not found:
        raise BenchError(f"{data} holds no released set: {released.fix()}")
    return found


def reference_rows(set_dir: Path, task: str, label: str, cache: str) -> list[dict]:
    """The rows the run script reads: datasets.load_dataset(set, label)[task], the card's data_files."""
    import datasets

    form = "parquet" if released.layout(str(set_dir)) == released.PARQUET else "json"
    paths = [str(p) for p in released.files(set_dir, task, label)]
    return list(datasets.load_dataset(form, data_files={task: paths}, split=task, cache_dir=cache))


def reference_prompt(ref_prompts, task: str, row: dict) -> str:
    """run_model_on_babilong.py's prompt_cfg with instruction, examples and post_prompt, then its call."""
    cfg = ref_prompts.DEFAULT_PROMPTS[task]
    return ref_prompts.get_formatted_input(
        row["input"],
        row["question"],
        cfg["examples"],
        cfg["instruction"],
        cfg["post_prompt"],
        template=ref_prompts.DEFAULT_TEMPLATE,
    )


def reference_ids(tokenizer, text: str, chat: bool) -> list[int]:
    if not chat:
        return list(tokenizer(text, add_special_tokens=True)["input_ids"])
    out = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
    return list(out["input_ids"] if hasattr(out, "keys") else out)  # transformers 5 returns a BatchEncoding


def reference_verdicts(ref_metrics, task: str, rows: list[tuple[str, str, str]], tmp: Path) -> list[bool]:
    """(target, output, question) rows through the run script's CSV and the leaderboard's reading."""
    import pandas as pd  # type: ignore[import-untyped]

    df = pd.DataFrame({"target": [], "output": [], "question": []})
    for target, output, question in rows:
        df.loc[len(df)] = [target, output.strip(), question]  # the run script strips the decoded output
    path = tmp / f"{task}.csv"
    df.to_csv(path)
    df = pd.read_csv(path)
    if df["output"].dtype != object:
        df["output"] = df["output"].astype(str)
    df["output"] = df["output"].fillna("")
    labels = ref_metrics.TASK_LABELS[task]
    return [
        bool(
            ref_metrics.compare_answers(
                target=r["target"], output=r["output"], question=r["question"], task_labels=labels
            )
        )
        for _, r in df.iterrows()
    ]


def predictions(task: str, target: str, question: str) -> list[str]:
    """Outputs that exercise compare_answers and the CSV round trip: right, wrong, two labels, a
    label of the question, the example-echo cuts, and the strings read_csv turns into NaN."""
    from tasks.babilong.prompts import TASK_LABELS

    rng = random.Random(f"{task}|{target}|{question}")
    labels = TASK_LABELS[task]
    other = rng.choice([x for x in labels if x.lower() != target.lower()] or labels)
    in_q = next((x for x in labels if x.lower() in question.lower()), other)
    return [
        f"The answer is {target}.",
        f"  {target.upper()}  ",
        other,
        f"{target} or {other}",
        f"{in_q} {target}",
        f"{other}. {target}",
        f"<context>{target}",
        f"Question {target}",
        "None",  # NaN after read_csv; compare_answers alone finds "no" in it (qa6, qa9, qa10, qa17, qa18)
        rng.choice(["none", "NA", "nan", "", "null", "N/A"]),
        rng.choice(labels) + " " + rng.choice(labels),
    ]


def our_side(set_dir: Path, task: str, label: str, tokenizer):
    """Our task's samples of (task, label) under the reference protocol, and the ids we send."""
    from harness.models.runners.common import prompt_ids
    from harness.pipeline.reasoning import chat_prompt
    from tasks.registry import get_task

    os.environ[released._source().env] = str(set_dir)
    released.clear_caches()
    t = get_task(f"babilong_{task}")
    t.set_protocol("reference")
    length = released.LABELS[label]
    samples = [t.sample(length, i, SEED, tokenizer) for i in range(t.default_samples(length) or 0)]
    ids = [
        (prompt_ids(tokenizer, s.prompt), prompt_ids(tokenizer, chat_prompt(tokenizer, s, t.reference_system_prompt)))
        for s in samples
    ]
    return t, samples, ids


def load_tokenizer(name: str | None, tmp: Path):
    from harness.models.tokenization import load_tokenizer as load

    if name is None:
        from harness.models.embedded import build_tokenizer

        name = str(build_tokenizer(tmp / "tokenizer"))
    tok = load(name)
    if not getattr(tok, "chat_template", None):
        tok.chat_template = CHATML
    return tok


def compare(ref_prompts, ref_metrics, set_dir: Path, tokenizer, tmp: Path, pins: dict) -> dict:
    totals = dict.fromkeys(("files", "prompts", "text", "ids", "chat_ids", "scores", "score_mismatch", "count"), 0)
    name = set_dir.name
    print(f"\n{name} ({released.layout(str(set_dir))})")
    print(f"{'task':6} {'length':>6} {'rows':>9} {'text':>5} {'ids':>5} {'chat':>5} {'scores':>9}")
    for task in [f"qa{i}" for i in range(1, 21)]:
        for label in released.LABELS:
            if not released.files(set_dir, task, label):
                continue
            rows = reference_rows(set_dir, task, label, str(tmp / "hf"))
            ref_text = [reference_prompt(ref_prompts, task, r) for r in rows]
            t, ours, our_ids = our_side(set_dir, task, label, tokenizer)
            n = min(len(rows), len(ours))
            text = sum(ref_text[i] != ours[i].prompt for i in range(n))
            ids = sum(reference_ids(tokenizer, ref_text[i], False) != our_ids[i][0] for i in range(n))
            chat = sum(reference_ids(tokenizer, ref_text[i], True) != our_ids[i][1] for i in range(n))
            outs = [
                (r["target"], p, r["question"]) for r in rows[:n] for p in predictions(task, r["target"], r["question"])
            ]
            verdicts = reference_verdicts(ref_metrics, task, outs, tmp)
            mine = [
                t.score(p, s) == 1.0
                for s in ours[:n]
                for p in predictions(task, s.references[0], s.metadata["question"])
            ]
            bad = sum(a != b for a, b in zip(verdicts, mine)) + abs(len(verdicts) - len(mine))
            print(
                f"{task:6} {label:>6} {len(rows):>4}/{len(ours):<4} {text:>5} {ids:>5} {chat:>5} {bad:>3}/{len(outs):<5}"
            )
            for k, v in (("files", 1), ("prompts", n), ("text", text), ("ids", ids), ("chat_ids", chat)):
                totals[k] += v
            totals["scores"] += len(outs)
            totals["score_mismatch"] += bad
            totals["count"] += len(rows) != len(ours)
            per = len(outs) // max(n, 1)
            pins.setdefault(name, {}).setdefault(task, {})[label] = {
                "rows": len(rows),
                "prompt_sha256": [sha(x) for x in ref_text],
                "outputs": [[o for _, o, _ in outs[i * per : (i + 1) * per]] for i in range(n)],
                "correct": [verdicts[i * per : (i + 1) * per] for i in range(n)],
            }
    return totals


# ---------------------------------------------------------------------------------------------
# Real-model parity (--model)

SHIM = '''"""Written by benchmarks/babilong_parity.py: transformers 4 behaviour for run_model_on_babilong.py."""
import os

import torch
from transformers import AutoModelForCausalLM, PreTrainedTokenizerBase

_load = AutoModelForCausalLM.from_pretrained.__func__


def _from_pretrained(cls, *args, **kwargs):
    if os.environ.get("BABILONG_PARITY_DTYPE") == "float32":  # --dtype float32: bf16 matmuls crawl on CPUs
        kwargs["torch_dtype"] = torch.float32
    try:
        return _load(cls, *args, **kwargs)
    except ImportError as exc:  # transformers 4 raised ValueError, which the script's fallback catches
        raise ValueError(str(exc)) from None


AutoModelForCausalLM.from_pretrained = classmethod(_from_pretrained)
_chat = PreTrainedTokenizerBase.apply_chat_template


def _apply_chat_template(self, *args, **kwargs):
    if kwargs.get("tokenize", True):
        kwargs.setdefault("return_dict", False)
    return _chat(self, *args, **kwargs)


PreTrainedTokenizerBase.apply_chat_template = _apply_chat_template
'''


def copy_set(src: Path, dst: Path, tasks: list[str], rows: int | None) -> list[str]:
    """The first `rows` rows of each (task, label) file of src, in src's layout, with the hub's dataset
    card (README.md `configs`); the labels copied."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.environ[released._source().env] = str(src)
    released.clear_caches()
    form = released.layout(str(src))
    card = ["---", "configs:"]
    labels = [label for label in released.LABELS if all(released.files(src, t, label) for t in tasks)]
    for label in labels:
        card += [f"- config_name: {label}", "  data_files:"]
        for task in tasks:
            items = released.items(task, label)[:rows]
            data = [{"input": x.input, "question": x.question, "target": x.target} for x in items]
            if form == released.JSON:
                path = dst / "data" / task / f"{label}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(data), encoding="utf-8")
                card += [f"  - split: {task}", f"    path: data/{task}/{label}.json"]
            else:
                path = dst / label / f"{task}-00000-of-00001.parquet"
                path.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(pa.Table.from_pylist(data), path)
                card += [f"  - split: {task}", f"    path: {label}/{task}-*"]
    (dst / "README.md").write_text("\n".join([*card, "---", ""]), encoding="utf-8")
    released.clear_caches()
    return labels


def model_dir(name: str, out: Path) -> Path:
    """A save_pretrained folder of the model (a .gguf or packaged model dequantized once)."""
    if (Path(name) / "config.json").is_file():
        return Path(name)
    target = out / "model"
    if (target / "config.json").is_file():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.core.errors import UserError
    from harness.models.sources.packaged import locate

    try:
        gguf = Path(name) if name.endswith(".gguf") else locate(name)
    except UserError as exc:
        raise BenchError(
            f"{name} is neither a save_pretrained folder nor a .gguf file or packaged model ({exc})"
        ) from None
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = model.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")  # the GGUF reader's marker: its weights are already dequantized
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(model.state_dict())
    plain.save_pretrained(target)
    tok.save_pretrained(target)
    return target


def run(cmd: list[str], env: dict, cwd: Path, log: Path) -> float:
    import subprocess
    import time

    start = time.time()
    with open(log, "w") as f:
        rc = subprocess.run(cmd, check=False, env=env, cwd=cwd, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc:
        raise BenchError(f"{' '.join(cmd[:3])} ... failed (exit {rc}): see {log}")
    return time.time() - start


def real_model(args, ref_metrics) -> int:
    out = args.out.expanduser().resolve()
    tasks = args.tasks.split(",")
    data = out / "data"
    labels = copy_set(args.data.expanduser().resolve(), data, tasks, args.samples)
    model = model_dir(args.model, out).resolve()
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", BABILONG_PARITY_DTYPE=args.dtype)
    shim = out / "shim"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "sitecustomize.py").write_text(SHIM, encoding="utf-8")
    side = ("chat" if args.chat else "plain") + "-" + args.dtype
    ref_dir, our_dir = out / f"reference-{side}", out / f"ours-{side}"
    ref_dir.mkdir(parents=True, exist_ok=True)
    times = {}
    if not (ref_dir / "done").exists():
        cmd = [sys.executable, str(args.reference.resolve() / "scripts" / "run_model_on_babilong.py")]
        cmd += ["--results_folder", "evals", "--dataset_name", str(data), "--model_name", "model"]
        cmd += ["--model_path", str(model), "--tasks", *tasks, "--lengths", *labels, "--api_url", ""]
        cmd += ["--use_instruction", "--use_examples", "--use_post_prompt"] + (
            ["--use_chat_template"] if args.chat else []
        )
        # its own datasets cache: datasets fingerprints a local folder's config by name, not content
        ref_env = {**env, "PYTHONPATH": str(shim), "HF_DATASETS_CACHE": str(ref_dir / "hf-datasets")}
        times["reference"] = run(cmd, ref_env, ref_dir, ref_dir / "log.txt")
        (ref_dir / "done").write_text(json.dumps(times["reference"]))
    if not (our_dir / "results.json").exists():
        cmd = [str(ROOT / ".venv" / "bin" / "harness"), "eval", "--ckpts", str(model), "--tasks"]
        cmd += [",".join(f"babilong_{t}" for t in tasks), "--babilong-data", str(data), "--dtype", args.dtype]
        cmd += ["--out", str(our_dir), "--no-progress", "--cache-dir", "none"] + (["--chat"] if args.chat else [])
        times["ours"] = run(cmd, env, ROOT, out / f"ours-{side}.log")
    print(report(ref_metrics, ref_dir / "evals" / "model", our_dir, tasks, labels, side))
    return 0


def report(ref_metrics, ref_dir: Path, our_dir: Path, tasks: list[str], labels: list[str], side: str) -> str:
    import numpy as np
    import pandas as pd

    recs = [json.loads(x) for x in (our_dir / "samples.jsonl").read_text().splitlines()[1:]]
    ours = {(r["task"], r["length"], r["index"]): r for r in recs}
    flags = "instruction_yes_examples_yes_post_prompt_yes_chat_template_" + ("yes" if side.startswith("chat") else "no")
    lines = [
        "| task | length | n | reference | ours | same output | ours - reference (95% CI) |",
        "|---|---|---|---|---|---|---|",
    ]
    rng = np.random.default_rng(0)
    for task in tasks:
        for label in labels:
            df = pd.read_csv(ref_dir / f"{task}_{label}_{flags}_system_prompt_no.csv")
            if df["output"].dtype != object:
                df["output"] = df["output"].astype(str)
            df["output"] = df["output"].fillna("")
            name, length = f"babilong_{task}", released.LABELS[label]
            df = df[[(name, length, i) in ours for i in range(len(df))]]  # the rows both sides ran
            ref = np.array(
                [
                    ref_metrics.compare_answers(r["target"], r["output"], r["question"], ref_metrics.TASK_LABELS[task])
                    for _, r in df.iterrows()
                ],
                dtype=float,
            )
            mine = [ours[(name, length, i)] for i in range(len(df))]
            our = np.array([r["score"] for r in mine], dtype=float)
            same = sum(
                str(o).strip() == r["prediction"].strip() or (o == "" and not r["prediction"].strip())
                for o, r in zip(df["output"], mine)
            )
            diff = our - ref
            boot = [diff[rng.integers(0, len(diff), len(diff))].mean() for _ in range(2000)]
            lo, hi = np.percentile(boot, [2.5, 97.5]) * 100
            lines.append(
                f"| {task} | {label} | {len(df)} | {ref.mean() * 100:.1f} | {our.mean() * 100:.1f} | {same}/{len(df)} | "
                f"{diff.mean() * 100:+.1f} ({lo:+.1f}, {hi:+.1f}) |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reference", required=True, type=Path, help="a checkout of booydar/babilong")
    p.add_argument("--data", type=Path, default=ROOT / "tests" / "babilong" / "released", help="released sets")
    p.add_argument("--tokenizer", help="a tokenizer (model dir, .gguf or packaged name); default: a local BPE")
    p.add_argument("--pin", type=Path, help="write the reference's prompt hashes and verdicts here")
    p.add_argument("--model", help="also run both pipelines on this model (folder, .gguf or packaged name)")
    p.add_argument("--tasks", default="qa1,qa2,qa3,qa4,qa5", help="with --model: tasks (default qa1-qa5)")
    p.add_argument("--samples", type=int, help="with --model: the first N rows of each file (default all)")
    p.add_argument("--chat", action="store_true", help="with --model: the chat template on both sides")
    p.add_argument("--threads", type=int, default=2, help="with --model: CPU threads of each side")
    p.add_argument(
        "--dtype",
        choices=("bfloat16", "float32"),
        default="bfloat16",
        help="with --model: both sides' dtype (the reference's is bfloat16; float32 is its loader's dtype forced)",
    )
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "babilong-parity", help="with --model: work folder")
    args = p.parse_args(argv)
    import warnings

    import datasets

    datasets.disable_progress_bar()
    datasets.logging.set_verbosity_error()
    # the run script's DataFrame starts with float columns that its string rows upcast (pandas warns)
    warnings.filterwarnings("ignore", message="Setting an item of incompatible dtype")
    try:
        ref_prompts, ref_metrics = load_reference(args.reference.expanduser())
        if args.model:
            return real_model(args, ref_metrics)
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            tokenizer = load_tokenizer(args.tokenizer, tmp)
            pins: dict = {}
            grand: dict = {}
            for set_dir in set_dirs(args.data.expanduser()):
                for k, v in compare(ref_prompts, ref_metrics, set_dir, tokenizer, tmp, pins).items():
                    grand[k] = grand.get(k, 0) + v
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"\n{grand['files']} files, {grand['prompts']} prompts: {grand['count']} row-count, {grand['text']} text, "
        f"{grand['ids']} token-id and {grand['chat_ids']} chat-template token-id mismatches; "
        f"{grand['scores']} predictions scored: {grand['score_mismatch']} score mismatches"
    )
    if args.pin:
        write_json(args.pin, {"sets": pins}, ensure_ascii=True, indent=None, sort_keys=True, separators=(",", ":"))
    mismatches = sum(grand[k] for k in ("count", "text", "ids", "chat_ids", "score_mismatch"))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
