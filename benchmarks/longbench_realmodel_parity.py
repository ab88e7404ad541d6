"""LongBench v1 on a real model: pred.py's own HF path beside `harness eval`, per task and item.

    python benchmarks/longbench_realmodel_parity.py --reference /tmp/ref/LongBench --model MODEL_DIR \
        --tasks trec,triviaqa,passage_retrieval_en,passage_count,lcc,qasper,multifieldqa_en --threads 2
    python benchmarks/longbench_realmodel_parity.py ... --only ours   # recompute our side, keep the reference's
    python benchmarks/longbench_realmodel_parity.py ... --report      # print the tables from the cache

MODEL_DIR is a transformers folder of SmolLM2-135M-Instruct (`harness convert smollm2-135m-instruct
--out DIR`); --data a folder of <task>.jsonl in data.zip's layout (default: the tests' fixtures,
tests/longbench/fixtures/data, 2-3 items a task).

The reference side imports LongBench/pred.py from the checkout (nothing in it is edited or copied)
and calls its own `get_pred` once per task, as its __main__ does with one process
(`data_all[0::1]`): prompt fill, middle truncation to model2maxlen, the per-task chat decision,
samsum's stop rule, greedy `model.generate`, decode with skip_special_tokens, post_process, its
output file. What pred.py cannot do here is supplied from outside, and only that:

- the model: pred.py knows eight hub models by name. The local one is registered the way pred.py
  registers a model, as an entry of the model2path and model2maxlen maps it is given (name
  `smollm2-<K>k`, path MODEL_DIR, budget model2maxlen = 1000 * K - 500: 3500 at --max-model-len 4096,
  the rule every entry of its config follows). Its loader has no branch for that name, so
  `load_model_and_tokenizer` is replaced by its own generic branch (AutoTokenizer,
  AutoModelForCausalLM at --dtype, `.eval()`) without trust_remote_code; the model is loaded once
  and shared by the tasks (pred.py reloads the same weights per task).
- the chat format: `build_chat` is written per model and returns the prompt unchanged for a name it
  does not know. With --chat (the default: pred.py evaluates chat models) it is replaced by the
  model's own chat template (`apply_chat_template`, one user turn, generation prompt), which is what
  `harness eval --chat` applies (docs/longbench-parity.md, difference 1); with --no-chat pred.py's
  function stays and neither side wraps anything.
- the device: get_pred hard-codes `cuda:{rank}`; without CUDA, the `torch` pred.py sees answers
  `torch.device(...)` with the CPU and is torch itself for everything else.
- `dist.destroy_process_group()` at its end (no process group is started without torchrun/spawn):
  a no-op. Its flash-attention patch module (CUDA packages) is a stand-in when absent, as in
  benchmarks/longbench_parity.py; nothing of it is called.
- the data: pred.py's __main__ reads the hub (`load_dataset('THUDM/LongBench', task)`); here the
  records come from --data's <task>.jsonl lines, which are those rows (data.zip), the first --samples.

The reference's scores are eval.py's `scorer` on pred.py's output file (the task's list, as eval.py
does; per item the same scorer on one prediction). Our side is one `harness eval --tasks ...
--max-model-len K --dtype D [--chat] --longbench DATA` under the default --protocol reference,
scored by its own metric code; both metric codes score both sides' predictions and the script stops
if they disagree. The token ids pred.py passes to generate() are recorded and compared with the ids
our runner is given for the same item (regenerated from the task and chat template, deterministic):
when they are identical, any difference of prediction is inference, not input.

Printed per task: n, the reference's score, ours, ours - ref with a 95% paired bootstrap interval
(items resampled jointly), identical inputs and identical predictions; then every item side by side.
Same model, dtype, threads, greedy decoding and tokens to generate on both sides (neither caps them).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from parity_kit import (  # after the sys.path lines above
    BenchError,
    check_model_folder,
    checkout_commit,
    exit_code,
    log,
    paired_interval,
    read_json,
    short,
    write_json,
)

DATA = ROOT / "tests" / "longbench" / "fixtures" / "data"
# Short outputs first: the run must fit a couple of shared CPU cores.
FIRST_LINE_TASKS = ("trec", "triviaqa", "samsum", "lsht")  # eval.py scores their first line only
DEFAULT_TASKS = "trec,triviaqa,passage_retrieval_en,passage_count,lcc,qasper,multifieldqa_en"


def thread_env(threads: int) -> dict:
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TOKENIZERS_PARALLELISM"):
        env[k] = "false" if k == "TOKENIZERS_PARALLELISM" else str(threads)
    return env


def cpu_seconds(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def model_name(context: int) -> str:
    return f"smollm2-{context // 1024}k"


def settings_key(args, side: str) -> dict:
    key = {
        "model": str(Path(args.model).resolve()),
        "data": str(Path(args.data).resolve()),
        "samples": args.samples,
        "max_model_len": args.max_model_len,
        "dtype": args.dtype,
        "chat": args.chat,
    }
    if side == "reference":
        key["reference"] = str(Path(args.reference).resolve())
    return key


def read_records(data: Path, task: str, samples: int | None) -> list[dict]:
    path = data / f"{task}.jsonl"
    if not path.is_file():
        raise BenchError(f"{path} does not exist: pass --data DIR holding <task>.jsonl (data.zip's layout)")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows[:samples] if samples else rows


# ---------------------------------------------------------------------------------------------
# The reference side: pred.py's get_pred, in this process


class _TorchOn(types.ModuleType):
    """torch for pred.py, except that torch.device(...) is the device the model is on."""

    def __init__(self, torch, device):
        super().__init__("torch")
        self._torch, self._device = torch, device

    def __getattr__(self, name):
        return getattr(self._torch, name)

    def device(self, *args, **kwargs):
        return self._device


class Reference:
    """pred.py and eval.py of the checkout, with the model registered and its loader supplied."""

    def __init__(self, args, load_model: bool = True):
        from longbench_parity import import_reference

        ref = Path(args.reference).resolve()
        if not (ref / "LongBench" / "pred.py").is_file():
            raise BenchError(f"{ref} is not a THUDM/LongBench checkout (no LongBench/pred.py): pass --reference DIR")
        self.pred, self.evaluate, self.configs = import_reference(ref)
        self.commit = checkout_commit(ref)
        self.args = args
        if load_model:
            self._load(args)

    def _load(self, args) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.name = model_name(args.max_model_len)
        self.model2path = {self.name: str(Path(args.model).resolve())}
        self.model2maxlen = {self.name: 1000 * (args.max_model_len // 1024) - 500}
        device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
        # pred.py's generic branch (chatglm/internlm/xgen): AutoTokenizer, AutoModelForCausalLM, .eval()
        self.tokenizer = AutoTokenizer.from_pretrained(self.model2path[self.name])
        model: Any = AutoModelForCausalLM.from_pretrained(
            self.model2path[self.name], torch_dtype=getattr(torch, args.dtype)
        )
        self.model = model.to(device).eval()
        self.calls: list[dict] = []
        generate = self.model.generate

        def recorded_generate(**kw):  # the ids and stop settings pred.py gives generate(), then generate
            t0 = time.perf_counter()
            out = generate(**kw)
            self.calls.append(
                {
                    "ids": kw["input_ids"][0].tolist(),
                    "eos_token_id": kw.get("eos_token_id"),
                    "min_length": kw.get("min_length"),
                    "max_new_tokens": kw["max_new_tokens"],
                    "new_tokens": int(out.shape[-1] - kw["input_ids"].shape[-1]),
                    "seconds": round(time.perf_counter() - t0, 3),
                }
            )
            return out

        self.model.generate = recorded_generate
        pred = self.pred
        pred.load_model_and_tokenizer = lambda path, name, device: (self.model, self.tokenizer)
        pred.dist = types.SimpleNamespace(destroy_process_group=lambda: None)
        if device.type == "cpu":
            pred.torch = _TorchOn(torch, device)
        if args.chat:
            pred.build_chat = lambda tokenizer, prompt, name: tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
        # else pred.py's own build_chat: no branch for this name, the prompt comes back unchanged
        pred.seed_everything(42)

    def run(self, task: str, records: list[dict]) -> dict:
        ev = self.evaluate
        self.calls = []
        with tempfile.TemporaryDirectory() as tmp:
            out_path = Path(tmp) / f"{task}.jsonl"
            t0, c0 = time.perf_counter(), cpu_seconds(resource.RUSAGE_SELF)
            self.pred.get_pred(
                0, 1, records, self.model2maxlen[self.name], self.configs["dataset2maxlen"][task],
                self.configs["dataset2prompt"][task], task, None, self.name, self.model2path, str(out_path),
            )  # fmt: skip
            wall, cpu = time.perf_counter() - t0, cpu_seconds(resource.RUSAGE_SELF) - c0
            rows = [json.loads(x) for x in out_path.read_text(encoding="utf-8").splitlines()]
        if len(rows) != len(records) or len(self.calls) != len(records):
            raise BenchError(f"pred.py wrote {len(rows)} predictions for {len(records)} {task} items")
        preds = [r["pred"] for r in rows]
        answers = [r["answers"] for r in rows]
        score = ev.scorer(task, preds, answers, rows[-1]["all_classes"])  # eval.py: the last line's classes
        samples = [
            {
                "prediction": p,
                "answers": a,
                "score": ev.scorer(task, [p], [a], r["all_classes"]) / 100,
                "input_ids": c["ids"],
                "stop": {"eos_token_id": c["eos_token_id"], "min_length": c["min_length"]},
                "max_new_tokens": c["max_new_tokens"],
                "new_tokens": c["new_tokens"],
                "seconds": c["seconds"],
            }
            for p, a, r, c in zip(preds, answers, rows, self.calls)
        ]
        return {
            "side": "reference",
            "task": task,
            "commit": self.commit,
            "model_name": self.name,
            "budget": self.model2maxlen[self.name],
            "settings": settings_key(self.args, "reference"),
            "score": score,
            "samples": samples,
            "time": {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)},
        }


# ---------------------------------------------------------------------------------------------
# Our side: harness eval in a subprocess


def run_ours(args, tasks: list[str]) -> dict[str, dict]:
    from harness.models.runners.common import prompt_ids
    from harness.models.tokenization import load_tokenizer
    from harness.pipeline.reasoning import chat_prompt
    from tasks.longbench import data as lb_data
    from tasks.registry import get_task

    out = Path(args.out).resolve() / "ours" / "run"
    shutil.rmtree(out, ignore_errors=True)
    env = thread_env(args.threads)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    cmd = [sys.executable, "-m", "harness", "eval", "--ckpts", str(Path(args.model).resolve())]
    cmd += ["--tasks", ",".join(tasks), "--protocol", "reference", "--max-model-len", str(args.max_model_len)]
    cmd += ["--dtype", args.dtype, "--longbench", str(Path(args.data).resolve()), "--out", str(out)]
    cmd += ["--cache-dir", "none", "--no-progress"]
    if args.samples:
        cmd += ["--samples", str(args.samples)]
    if args.chat:
        cmd += ["--chat"]
    log("ours: " + " ".join(cmd[2:]))
    logfile = out.parent / "eval.log"
    logfile.parent.mkdir(parents=True, exist_ok=True)
    t0, c0 = time.perf_counter(), cpu_seconds(resource.RUSAGE_CHILDREN)
    with open(logfile, "w") as f:
        rc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, check=False).returncode
    wall, cpu = time.perf_counter() - t0, cpu_seconds(resource.RUSAGE_CHILDREN) - c0
    if rc != 0:
        raise BenchError(f"harness eval exited {rc}; see {logfile}")
    records: dict[str, list[dict]] = {}
    for line in (out / "samples.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if r.get("type") == "sample":
            records.setdefault(r["task"], []).append(r)
    # The inputs our runner got: the task's sample, wrapped when the task is (regenerated, deterministic).
    tok = load_tokenizer(str(Path(args.model).resolve()))
    lb_data.set_data_dir(Path(args.data).resolve())
    result = {}
    for task in tasks:
        recs = sorted(records.get(task, []), key=lambda r: r["index"])
        if not recs:
            raise BenchError(f"harness eval stored no {task} samples under {out}")
        t = get_task(task)
        t.set_protocol("reference")
        samples = []
        for r in recs:
            s = t.sample(r["length"], r["index"], r.get("seed", 42), tok)
            wrapped = args.chat and t.uses_chat_template()
            text = chat_prompt(tok, s, None) if wrapped else s.prompt
            samples.append(
                {
                    "prediction": r["prediction"],
                    "answers": list(s.references),
                    "score": r["score"],
                    "input_ids": prompt_ids(tok, text),
                    "max_new_tokens": s.max_new_tokens,
                    "stop": {k: s.metadata[k] for k in ("stop_tokens", "min_new_tokens") if k in s.metadata},
                    "length": r["length"],
                }
            )
        result[task] = {
            "side": "ours",
            "task": task,
            "budget": recs[0]["length"],
            "settings": settings_key(args, "ours"),
            "task_version": recs[0].get("task_version"),
            "score": round(100 * sum(s["score"] for s in samples) / len(samples), 2),
            "samples": samples,
            # one harness eval for every task (planning, model load, generation, scoring)
            "time": {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "tasks": len(tasks)},
        }
    return result


# ---------------------------------------------------------------------------------------------
# Tables


def check_metrics(evaluate, task: str, ref: dict, ours: dict) -> int:
    """Both metric codes on both sides' predictions, per item: eval.py's scorer and ours must agree."""
    from tasks.longbench.metrics import score_sample

    bad = 0
    for r, o in zip(ref["samples"], ours["samples"]):
        classes = r["all_classes"]
        bad += evaluate.scorer(task, [o["prediction"]], [o["answers"]], classes) != round(100 * o["score"], 2)
        bad += round(100 * score_sample(task, r["prediction"], r["answers"], classes), 2) != round(100 * r["score"], 2)
    return bad


def scored_text(task: str, prediction: str) -> str:
    """The part of a prediction eval.py's scorer reads: the first line (after leading newlines) on
    trec, triviaqa, samsum and lsht, else all of it."""
    return prediction.lstrip("\n").split("\n")[0] if task in FIRST_LINE_TASKS else prediction


def print_tables(args, cells: dict[str, tuple[dict, dict]], metric_mismatches: dict[str, int]) -> None:
    ref0 = next(iter(cells.values()))[0]
    budget = ref0["budget"]
    print(
        f"\n## LongBench v1 on {Path(args.model).name}: pred.py (THUDM/LongBench {ref0['commit'][:7]}) "
        f"vs harness eval --protocol reference\n"
    )
    print(
        f"{args.dtype}, greedy, prompt budget {budget} (model2maxlen of a {args.max_model_len // 1024}K model; "
        f"ours --max-model-len {args.max_model_len}), chat {'on (the model template, per pred.py task policy)' if args.chat else 'off'}, "
        f"{args.threads} thread(s), data {Path(args.data).resolve()}\n"
    )
    print(
        "| task | n | cut | reference | ours | ours − ref | paired 95% | same input ids | same predictions | "
        "same scored text |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    totals = [0, 0, 0, 0]
    for task, (ref, ours) in cells.items():
        rs = [s["score"] for s in ref["samples"]]
        os_ = [s["score"] for s in ours["samples"]]
        n = len(rs)
        # per item at eval.py's precision (its scorer rounds to 0.01 points)
        lo, hi = paired_interval(os_, rs, task, stream="longbench-realmodel-parity", places=2)
        same_ids = sum(a["input_ids"] == b["input_ids"] for a, b in zip(ref["samples"], ours["samples"]))
        pairs = list(zip(ref["samples"], ours["samples"]))
        same_pred = sum(a["prediction"] == b["prediction"] for a, b in pairs)
        same_text = sum(scored_text(task, a["prediction"]) == scored_text(task, b["prediction"]) for a, b in pairs)
        cut = sum(1 for s in ref["samples"] if s["cut"])
        totals[0] += n
        totals[1] += same_ids
        totals[2] += same_pred
        totals[3] += same_text
        print(
            f"| {task} | {n} | {cut} | {ref['score']:.2f} | {ours['score']:.2f} | {ours['score'] - ref['score']:+.2f} | "
            f"[{lo:+.1f}, {hi:+.1f}] | {same_ids}/{n} | {same_pred}/{n} | {same_text}/{n} |"
        )
    n = totals[0]
    print(f"| **all** | {n} | | | | | | {totals[1]}/{n} | {totals[2]}/{n} | {totals[3]}/{n} |")
    bad = sum(metric_mismatches.values())
    print(
        f"\nmetric check, {totals[0]} items x 2 sides: eval.py's scorer on our predictions vs our scores, and "
        f"our metric on pred.py's predictions vs eval.py's: {bad} mismatches"
    )

    print("\n## Item by item (predictions as JSON strings, cut to 48 characters)\n")
    print("| task | item | input tokens | ref new | ours | reference prediction | our prediction | ref | ours |")
    print("|---|---:|---:|---:|---|---|---|---:|---:|")
    for task, (ref, ours) in cells.items():
        for i, (r, o) in enumerate(zip(ref["samples"], ours["samples"])):
            same = "same" if r["prediction"] == o["prediction"] else "**differs**"
            print(
                f"| {task} | {i} | {len(r['input_ids'])} | {r['new_tokens']} | {same} | `{short(r['prediction'], 48, table=False)}` | "
                f"`{short(o['prediction'], 48, table=False)}` | {100 * r['score']:.1f} | {100 * o['score']:.1f} |"
            )

    rw = sum(r["time"]["wall_s"] for r, _ in cells.values())
    rc = sum(r["time"]["cpu_s"] for r, _ in cells.values())
    runs = {json.dumps(o["time"], sort_keys=True): o["time"] for _, o in cells.values()}  # one per harness eval
    ow = sum(t["wall_s"] for t in runs.values())
    oc = sum(t["cpu_s"] for t in runs.values())
    print(
        f"\ntime: reference get_pred {rw:.0f} s wall / {rc:.0f} s CPU (model loaded once, not counted); "
        f"ours {len(runs)} harness eval run(s) of {sum(t['tasks'] for t in runs.values())} task(s) "
        f"{ow:.0f} s wall / {oc:.0f} s CPU (planning, model load, generation, scoring)"
    )


# ---------------------------------------------------------------------------------------------


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", required=True, help="a checkout of THUDM/LongBench (LongBench/pred.py is imported)")
    ap.add_argument("--model", required=True, help="a transformers folder both pipelines load (SmolLM2)")
    ap.add_argument("--data", default=str(DATA), help="folder of <task>.jsonl in data.zip's layout")
    ap.add_argument("--tasks", default=DEFAULT_TASKS, help=f"comma list (default {DEFAULT_TASKS})")
    ap.add_argument("--samples", type=int, help="the first N items of each task (default: all)")
    ap.add_argument(
        "--max-model-len",
        type=int,
        default=4096,
        help="the context both sides run with: pred.py's budget is 1000 * (N // 1024) - 500 (default 4096: 3500)",
    )
    ap.add_argument(
        "--dtype",
        default="float32",
        choices=["bfloat16", "float32"],
        help="both sides (default float32, the converted weights exactly; pred.py's loaders use bfloat16)",
    )
    ap.add_argument(
        "--chat",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="wrap with the model's chat template where pred.py wraps (default on; --no-chat: neither side wraps)",
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch/OMP threads of both sides (default 1: on cores shared with other jobs 2 threads ran 10x slower)",
    )
    ap.add_argument("--out", default="runs/longbench-realmodel-parity", help="cache folder")
    ap.add_argument("--only", choices=["reference", "ours"], help="compute one side; read the other from the cache")
    ap.add_argument("--report", action="store_true", help="print the tables from the cache; compute nothing")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    return exit_code(run, parse_args(argv))


def run(args) -> int:
    from tasks.longbench.prompts import DATASETS

    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [t for t in tasks if t not in DATASETS]
    if unknown:
        raise BenchError(f"unknown task(s) {', '.join(unknown)}: choose from {', '.join(DATASETS)}")
    check_model_folder(args.model)
    if args.max_model_len < 1024 or (args.samples is not None and args.samples < 1):
        raise BenchError("--max-model-len must be at least 1024 and --samples at least 1")
    data = Path(args.data).resolve()
    records = {t: read_records(data, t, args.samples) for t in tasks}
    os.environ.update({k: v for k, v in thread_env(args.threads).items() if k.isupper()})
    import torch

    torch.set_num_threads(args.threads)
    out = Path(args.out).resolve()

    def cached(side: str, task: str):
        c = read_json(out / side / f"{task}.json")
        if c and c.get("settings") == settings_key(args, side) and len(c.get("samples", [])) == len(records[task]):
            return c
        return None

    # Without --only a side is computed where its cache is missing (resume); --only SIDE recomputes SIDE.
    sides = [] if args.report else [s for s in ("reference", "ours") if args.only in (None, s)]
    todo = {s: [t for t in tasks if args.only == s or cached(s, t) is None] for s in sides}
    ref_side = Reference(args, load_model=bool(todo.get("reference")))
    for task in todo.get("reference", []):
        log(f"reference {task}: {len(records[task])} items")
        r = ref_side.run(task, records[task])
        for s, rec in zip(r["samples"], records[task]):
            prompt = ref_side.configs["dataset2prompt"][task].format(**rec)  # whether pred.py cut it
            s["cut"] = len(ref_side.tokenizer(prompt, truncation=False).input_ids) > r["budget"]
            s["all_classes"] = rec.get("all_classes")
        write_json(out / "reference" / f"{task}.json", r)
        log(f"reference {task}: {r['score']} ({r['time']['wall_s']:.0f} s)")
    if todo.get("ours"):
        for task, o in run_ours(args, todo["ours"]).items():
            write_json(out / "ours" / f"{task}.json", o)
            log(f"ours {task}: {o['score']}")
    cells, mism = {}, {}
    for task in tasks:
        ref, ours = cached("reference", task), cached("ours", task)
        if ref is None or ours is None:
            log(f"{task}: not measured on both sides with these settings")
            continue
        cells[task] = (ref, ours)
        mism[task] = check_metrics(ref_side.evaluate, task, ref, ours)
    if not cells:
        raise BenchError(f"nothing cached under {out} for these settings: run without --report")
    print_tables(args, cells, mism)
    return 0


if __name__ == "__main__":
    sys.exit(main())
