"""Bad input to generate, eval, report, leaderboard, diagnose and demo: one table, one contract.

Every case must end with exit code 2, exactly one line on stderr starting `error:`, no traceback,
and nothing changed under the workspace (inputs, output directories, the working directory).
The cases run in-process through harness.cli.main (argparse errors raise SystemExit(2)), with the
working directory inside the hashed workspace so a stray default output (results/<name>) shows.
(tests/cli/test_bad_input_train.py holds the `harness train` cases.)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.errors import UserError
from harness.core.results_schema import SCHEMA_VERSION


def _stats(mean, n=2, **extra):
    return {"mean": mean, "std": 1.0, "min": mean - 1, "max": mean + 1, "n": n, "steps": [10, 20], **extra}


GOOD = {
    "schema_version": 1,
    "run": {
        "name": "good",
        "model": "runs/good",
        "mode": "anchor",
        "checkpoints": [
            {"path": "runs/good/ckpt-10", "step": 10, "fingerprint": "a", "training": None},
            {"path": "runs/good/ckpt-20", "step": 20, "fingerprint": "b", "training": None},
        ],
    },
    "provenance": {"package_version": "0.1.0", "git_hash": "0123456789ab", "backend": "hf"},
    "suites": {
        "ruler": {
            "tasks": ["niah_single_1", "vt"],
            "evaluated": ["niah_single_1", "vt"],
            "excluded": [],
            "unavailable": {},
            "lengths": [4096, 8192],
            "per_task": {
                "niah_single_1": {"4096": _stats(90.0), "8192": _stats(80.0)},
                "vt": {"4096": _stats(70.0), "8192": _stats(60.0)},
            },
            "per_length": {
                "4096": _stats(80.0, tasks_covered=2, tasks_total=2),
                "8192": _stats(70.0, tasks_covered=2, tasks_total=2),
            },
            "summary": {
                "avg": _stats(75.0),
                "effective_length": {"threshold": 85.6, "value": None, "label": "below the first length"},
                "tasks_covered": 2,
                "tasks_total": 2,
            },
        }
    },
}


def _variant(edit):
    data = json.loads(json.dumps(GOOD))
    edit(data)
    return data


def _suite(d):
    return d["suites"]["ruler"]


# name -> results.json content (dict: JSON-encoded; str/bytes: written as is)
BAD_RESULTS = {
    "suite-is-string": _variant(lambda d: d["suites"].update(ruler="ruler")),
    "mean-is-string": _variant(lambda d: _suite(d)["per_task"]["vt"]["4096"].update(mean="high")),
    "lengths-null": _variant(lambda d: _suite(d).update(lengths=None)),
    "no-per-task": _variant(lambda d: _suite(d).pop("per_task")),
    "no-summary": _variant(lambda d: _suite(d).pop("summary")),
    "no-run": _variant(lambda d: d.pop("run")),
    "run-name-empty": _variant(lambda d: d["run"].update(name="")),
    "schema-newer": _variant(lambda d: d.update(schema_version=SCHEMA_VERSION + 1)),
    "schema-v0": _variant(lambda d: d.update(schema_version=0)),
    "schema-string": _variant(lambda d: d.update(schema_version="1")),
    "suites-empty": _variant(lambda d: d.update(suites={})),
    "evaluated-string": _variant(lambda d: _suite(d).update(evaluated="vt")),
    "checkpoints-string": _variant(lambda d: d["run"].update(checkpoints="10,20")),
    "length-key-text": _variant(lambda d: _suite(d)["per_length"].update(long=_stats(1.0))),
    "per-length-mean-null": _variant(lambda d: _suite(d)["per_length"]["4096"].update(mean=None)),
    "std-is-string": _variant(lambda d: _suite(d)["per_task"]["vt"]["8192"].update(std="wide")),
    "summary-avg-string": _variant(lambda d: _suite(d)["summary"].update(avg="75")),
    "provenance-string": _variant(lambda d: d.update(provenance="hf")),
    "git-hash-number": _variant(lambda d: d["provenance"].update(git_hash=123)),
    "effective-length-string": _variant(lambda d: _suite(d)["summary"].update(effective_length="8K")),
    "top-level-list": "[1, 2, 3]\n",
    "nan-mean": json.dumps(GOOD).replace('"mean": 90.0', '"mean": NaN'),
    "not-json": "{not json",
    "empty-file": "",
    "binary-garbage": bytes(range(256)) * 4,
    "deeply-nested": "[" * 200000,
}
# A schema-2 file: intervals and per-sample scores (the fields the bootstrap and pairing read).
GOOD2 = _variant(
    lambda d: (
        d.update(schema_version=2),
        _suite(d)["per_task"]["vt"]["4096"].update(ci_low=60.0, ci_high=80.0),
        _suite(d).update(
            samples={
                "vt": {
                    "4096": {
                        "task_version": "1",
                        "dataset_hash": "h",
                        "seed": 42,
                        "index": [0, 1],
                        "scores": {"10": [1.0, 0.0], "20": [1.0, 1.0]},
                    }
                }
            }
        ),
    )
)


def _variant2(edit):
    data = json.loads(json.dumps(GOOD2))
    edit(data)
    return data


def _block(d):
    return _suite(d)["samples"]["vt"]["4096"]


def _cell(d):
    return _suite(d)["per_task"]["vt"]["4096"]


# Stored fields of the wrong type or range (issue 24, section 4): each is one error naming the field,
# never an average over a 1.5 or a traceback in the bootstrap.
BAD_RESULTS_2 = {
    "ci-bound-string": _variant2(lambda d: _cell(d).update(ci_low="60")),
    "ci-bound-nan": json.dumps(GOOD2).replace('"ci_low": 60.0', '"ci_low": NaN'),
    "ci-bound-inf": json.dumps(GOOD2).replace('"ci_high": 80.0', '"ci_high": Infinity'),
    "ci-reversed": _variant2(lambda d: _cell(d).update(ci_low=90.0, ci_high=10.0)),
    "sample-score-above-1": _variant2(lambda d: _block(d)["scores"].update({"10": [1.5, 0.0]})),
    "sample-score-negative": _variant2(lambda d: _block(d)["scores"].update({"10": [-3, 0.0]})),
    "sample-score-string": _variant2(lambda d: _block(d)["scores"].update({"10": ["1", 0.0]})),
    "scores-shorter-than-index": _variant2(lambda d: _block(d)["scores"].update({"10": [1.0]})),
    "index-negative": _variant2(lambda d: _block(d).update(index=[-1, 1])),
    "index-repeated": _variant2(lambda d: _block(d).update(index=[0, 0])),
    "block-without-scores": _variant2(lambda d: _block(d).pop("scores")),
    "length-key-negative": _variant2(lambda d: _suite(d)["per_task"]["vt"].update({"-4096": _stats(50.0)})),
    "lengths-negative": _variant2(lambda d: _suite(d).update(lengths=[-4096, 8192])),
    "mean-above-100": _variant2(lambda d: _cell(d).update(mean=150.0, max=151.0, ci_high=152.0)),
    "mean-outside-min-max": _variant2(lambda d: _cell(d).update(mean=10.0)),
    "n-zero": _variant2(lambda d: _cell(d).update(n=0)),
    "std-negative": _variant2(lambda d: _cell(d).update(std=-1.0)),
    "step-string": _variant2(lambda d: d["run"]["checkpoints"][0].update(step="10")),
    "throughput-string": _variant2(
        lambda d: d["provenance"].update(throughput={"seconds_per_sample": {"vt": {"4096": "fast"}}})
    ),
    "heatmap-above-100": _variant2(
        lambda d: _suite(d).update(
            depth_heatmap={
                "tasks": ["vt"],
                "bins": [[0, 10]],
                "lengths": [4096],
                "cells": {"4096": [{"mean": 150.0, "n": 1, "checkpoints": 2}]},
            }
        )
    ),
    "bool-as-count": _variant2(lambda d: _suite(d)["per_length"]["4096"].update(tasks_covered=True)),
    "run-name-carriage-return": _variant2(lambda d: d["run"].update(name="run\r=HYPERLINK(1)")),
    "run-name-escape-sequence": _variant2(lambda d: d["run"].update(name="\x1b[2Jrun")),
}
BAD_RESULTS.update(BAD_RESULTS_2)
LEADERBOARD_BAD = [
    "suite-is-string",
    "mean-is-string",
    "lengths-null",
    "no-per-task",
    "no-run",
    "schema-newer",
    "nan-mean",
    "binary-garbage",
]


@pytest.fixture(scope="module")
def ws(tmp_path_factory, tiny_llama_dir):
    """The workspace every case runs in: checkpoints good and damaged, results files, stores."""
    root = tmp_path_factory.mktemp("bad-input")
    ck = root / "ckpt"
    shutil.copytree(tiny_llama_dir, ck)
    for name, damage in (
        ("ckpt-noise", lambda d: (d / "model.safetensors").write_bytes(os.urandom(5000))),
        ("ckpt-trunc", lambda d: os.truncate(d / "model.safetensors", 3000)),
        ("ckpt-badcfg", lambda d: (d / "config.json").write_text("garbage{")),
        ("ckpt-badtok", lambda d: (d / "tokenizer.json").write_text("xx{")),
        ("ckpt-notok", lambda d: [p.unlink() for p in d.iterdir() if p.name.startswith(("tokenizer", "special"))]),
    ):
        shutil.copytree(ck, root / name)
        damage(root / name)
    (root / "ckpt-empty").mkdir()
    res = root / "results"
    res.mkdir()
    (res / "good.json").write_text(json.dumps(GOOD))
    for name, content in BAD_RESULTS.items():
        path = res / f"{name}.json"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content if isinstance(content, str) else json.dumps(content))
    (root / "rundir-empty").mkdir()
    store = root / "store-corrupt"
    store.mkdir()
    header = {"type": "header", "schema_version": 1, "created": "x", "package_version": "0", "git_hash": None}
    (store / "samples.jsonl").write_text(json.dumps(header) + "\nthis is no record\n")
    bad = store.parent / "store-badtypes"
    bad.mkdir()
    rec = {"type": "sample", "checkpoint": {"path": "c", "step": 1, "fingerprint": "f"}, "task": "vt"}
    rec.update(task_version="1", length="4k", index=0, seed=42, score="high")
    (bad / "samples.jsonl").write_text(json.dumps(header) + "\n" + json.dumps(rec) + "\n")
    (root / "store-foreign.jsonl").write_text('{"type": "header", "schema_version": 99}\n')
    (root / "store-noheader.jsonl").write_text(json.dumps(rec) + "\n")  # records, but no header line
    (res / "good2.json").write_text(json.dumps(GOOD2))
    _bad_stores(root, header)
    _data_files(root)
    _outputs(root)
    (root / "afile").write_text("a file where a directory is expected\n")
    (root / "text.bin").write_bytes(bytes(range(256)))
    return root


RECORD = {
    "type": "sample",
    "run": "r",
    "checkpoint": {"path": "c", "step": 1, "fingerprint": "f"},
    "suite": "ruler",
    "task": "vt",
    "task_version": "1",
    "length": 4096,
    "index": 0,
    "seed": 42,
    "dataset_hash": "h",
    "prediction": "x",
    "score": 1.0,
    "metric": "string_match_all",
    "num_tokens": 10,
    "settings": {},
    "metadata": {},
}
# name -> the record's edit (a samples.jsonl of a header and that one line)
BAD_RECORDS = {
    "run-carriage-return": {"run": "a\rb"},
    "score-above-1": {"score": 1.5},
    "score-negative": {"score": -3},
    "score-string": {"score": "1"},
    "length-negative": {"length": -4096},
    "index-negative": {"index": -2},
    "seed-negative": {"seed": -1},
    "length-bool": {"length": True},
    "no-fingerprint": {"checkpoint": {"path": "c", "step": 1}},
    "settings-list": {"settings": [1]},
    "nll-string": {"metadata": {"nll": "x", "tokens": 3}},
    "tokens-zero": {"metadata": {"nll": 1.0, "tokens": 0}},
    "depth-above-100": {"metadata": {"answer_depths": [150.0]}},
    "eval-seconds-negative": {"eval_seconds": -1.0},
}


def _bad_stores(root: Path, header: dict) -> None:
    for name, edit in BAD_RECORDS.items():
        d = root / f"store-{name}"
        d.mkdir()
        (d / "samples.jsonl").write_text(json.dumps(header) + "\n" + json.dumps({**RECORD, **edit}) + "\n")
    d = root / "store-score-nan"
    d.mkdir()
    (d / "samples.jsonl").write_text(json.dumps(header) + "\n" + json.dumps(RECORD).replace("1.0", "NaN") + "\n")
    d = root / "store-fifo"
    d.mkdir()
    os.mkfifo(d / "samples.jsonl")


def _jsonl(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


NOT_UTF8 = b"\xff\xfe\x80 not utf-8 \xc3\x28"


def _data_files(root: Path) -> None:
    """Data files named by --essays/--squad/--hotpotqa/--longbench and the HARNESS_* variables."""
    d = root / "data"
    d.mkdir()
    (d / "essays-latin1.txt").write_bytes(NOT_UTF8 * 50)
    os.mkfifo(d / "essays-fifo.txt")
    (d / "essays-dir").mkdir()
    (d / "essays-dir" / "a.txt").write_text("word " * 200)
    os.mkfifo(d / "essays-dir" / "b.txt")
    (d / "essays-list.json").write_text("[1, 2]")
    (d / "essays-text-number.json").write_text('{"text": 5}')
    os.mkfifo(d / "squad-fifo.json")
    (d / "squad-shape.json").write_text('{"data": "x"}')
    (d / "squad-impossible-string.json").write_text(
        json.dumps(
            {
                "data": [
                    {"paragraphs": [{"context": "c", "qas": [{"question": "q", "is_impossible": "no", "answers": []}]}]}
                ]
            }
        )
    )
    (d / "hotpot-latin1.json").write_bytes(b"[" + NOT_UTF8 + b"]")
    good_ppl = {"text": "a long document " * 100}
    _jsonl(d / "ppl-rows-not-objects.jsonl", [good_ppl, "[1, 2]"])
    _jsonl(d / "ppl-bad-json-line.jsonl", [good_ppl, '{"text": "unterminated'])
    _jsonl(d / "ppl-text-number.jsonl", [{"text": 12345}])
    (d / "ppl-latin1.txt").write_bytes(NOT_UTF8 * 10)
    os.mkfifo(d / "ppl-fifo.jsonl")
    (d / "ppl-dir").mkdir()
    os.mkfifo(d / "ppl-dir" / "doc.txt")
    lb = {"input": "q", "context": "c", "answers": ["a"], "length": 10, "all_classes": None, "_id": "x"}
    _jsonl(d / "lb-answers-string" / "trec.jsonl", [{**lb, "answers": "a"}])
    _jsonl(d / "lb-length-string" / "trec.jsonl", [{**lb, "length": "10"}])
    _jsonl(d / "lb-no-context" / "trec.jsonl", [{k: v for k, v in lb.items() if k != "context"}])
    (d / "lb-latin1").mkdir()
    (d / "lb-latin1" / "trec.jsonl").write_bytes(NOT_UTF8)
    (d / "lb-fifo").mkdir()
    os.mkfifo(d / "lb-fifo" / "trec.jsonl")
    icl = {"text": "what is it?", "label": 0}
    for name, train, labels in (
        ("icl-label-string", [{**icl, "label": "0"}], ["A", "B"]),
        ("icl-label-negative", [{**icl, "label": -1}], ["A", "B"]),
        ("icl-label-nan", ['{"text": "x", "label": NaN}'], ["A", "B"]),
        ("icl-labels-not-list", [icl], {"0": "A"}),
        ("icl-bad-json-line", [icl, "{oops"], ["A", "B"]),
    ):
        _jsonl(d / name / "trec_coarse" / "train.jsonl", train)
        _jsonl(d / name / "trec_coarse" / "test.jsonl", [icl])
        (d / name / "trec_coarse" / "labels.json").write_text(json.dumps(labels))
    mmlu = {"question": "q?", "subject": "anatomy", "choices": ["a", "b", "c", "d"], "answer": 1}
    for name, row in (
        ("mmlu-answer-out-of-range", {**mmlu, "answer": 7}),
        ("mmlu-choices-string", {**mmlu, "choices": "abcd"}),
    ):
        _jsonl(d / name / "test.jsonl", [row])
        _jsonl(d / name / "dev.jsonl", [mmlu] * 5)
    hs = {"ctx": "c", "ctx_a": "a", "ctx_b": "b", "activity_label": "x", "endings": ["1", "2", "3", "4"], "label": "x"}
    _jsonl(d / "hs-label-text" / "validation.jsonl", [hs])


def _outputs(root: Path) -> None:
    """Output paths in the way: results.json or index.html that is a directory."""
    (root / "out-resdir" / "results.json").mkdir(parents=True)
    (root / "out-lbdir" / "index.html").mkdir(parents=True)


def _tree(root: Path) -> dict[str, str]:
    """Every path under root with a content digest (size+mtime+inode for large files: cheap)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root) + "/"] = "dir"
        for f in filenames:
            p = os.path.join(dirpath, f)
            st = os.stat(p)
            if not stat.S_ISREG(st.st_mode):
                out[os.path.relpath(p, root)] = f"special:{st.st_mode}"
            elif st.st_size > 65536:
                out[os.path.relpath(p, root)] = f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
            else:
                out[os.path.relpath(p, root)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


EVAL = ["eval", "--ckpts", "ckpt", "--tasks", "niah_single_1", "--lengths", "1k", "--samples", "1"]
EVAL_OUT = ["--out", "out-eval", "--no-progress"]
GEN = ["generate", "--tasks", "niah_single_1", "--lengths", "1k", "--samples", "1", "--tokenizer", "ckpt"]
GEN_OUT = ["--out", "out-gen"]
DIAG = ["diagnose", "rope", "--ckpt", "ckpt", "--dtypes", "fp32", "--shifts", "0,16", "--seq-len", "128"]
DIAG_REST = ["--num-samples", "1", "--logit-lengths", "none", "--device", "cpu", "--no-plots", "--out", "out-diag"]
DEMO = ["demo", "--out", "out-demo"]
LB = ["leaderboard", "results/good.json", "--out", "out-lb"]


def _eval(*flags: str, ckpts: str | None = None) -> list[str]:
    argv = EVAL + list(flags) + EVAL_OUT
    if ckpts is not None:
        argv[2] = ckpts
    return argv


def _eval_no(flag: str, *flags: str) -> list[str]:
    """The eval base command without `flag` (and its value), plus flags."""
    argv = EVAL + EVAL_OUT
    i = argv.index(flag)
    return argv[:i] + argv[i + 2 :] + list(flags)


CASES: list[tuple[str, list[str]]] = [
    # ---- eval: numeric flags (lower bound, NaN/inf)
    ("eval-max-model-len-0", _eval("--max-model-len", "0")),
    ("eval-max-model-len-negative", _eval("--max-model-len=-5")),
    ("eval-rope-theta-negative", _eval("--rope-theta=-1")),
    ("eval-rope-theta-0", _eval("--rope-theta", "0")),
    ("eval-rope-theta-nan", _eval("--rope-theta", "nan")),
    ("eval-rope-theta-inf", _eval("--rope-theta", "inf")),
    ("eval-batch-size-0", _eval("--batch-size", "0")),
    ("eval-samples-0", _eval("--samples", "0")),
    ("eval-samples-negative", _eval("--samples=-3")),
    ("eval-last-0", _eval("--last", "0")),
    ("eval-seed-negative", _eval("--seed=-1")),
    ("eval-max-length-0", _eval("--max-length", "0")),
    ("eval-tensor-parallel-0", _eval("--tensor-parallel-size", "0")),
    ("eval-data-parallel-0", _eval("--data-parallel", "0")),
    ("eval-threshold-nan", _eval("--threshold", "nan")),
    ("eval-threshold-negative", _eval("--threshold=-1")),
    ("eval-threshold-above-100", _eval("--threshold", "101")),
    ("eval-threshold-inf", _eval("--threshold", "inf")),
    # ---- eval: lengths and argparse's own errors
    ("eval-lengths-equals-negative", _eval("--lengths=-1k")),
    ("eval-lengths-space-negative", _eval("--lengths", "-1k")),
    ("eval-lengths-open-range", _eval("--lengths", "4k-")),
    ("eval-lengths-text", _eval("--lengths", "abc")),
    ("eval-lengths-empty", _eval("--lengths", "")),
    ("eval-lengths-beyond-context", _eval("--lengths", "16k")),
    ("eval-lengths-below-minimum", _eval("--lengths", "100")),
    ("eval-batch-size-text", _eval("--batch-size", "x")),
    ("eval-rope-theta-text", _eval("--rope-theta", "x")),
    ("eval-last-text", _eval("--last", "x")),
    ("eval-unknown-flag", _eval("--bogus-flag")),
    ("eval-dtype-choice", _eval("--dtype", "float8")),
    ("eval-backend-choice", _eval("--backend", "tpu")),
    ("eval-ckpts-no-value", ["eval", "--ckpts"]),
    ("eval-rope-scaling-not-json", _eval("--rope-scaling", "{bad")),
    ("eval-rope-scaling-list", _eval("--rope-scaling", "[1]")),
    ("eval-rope-scaling-no-type", _eval("--rope-scaling", '{"factor": 2.0}')),
    ("eval-rope-scaling-negative-factor", _eval("--rope-scaling", '{"rope_type": "linear", "factor": -2}')),
    ("eval-rope-scaling-empty-object", _eval("--rope-scaling", "{}")),
    ("eval-rope-scaling-unknown-type", _eval("--rope-scaling", '{"rope_type": "bogus", "factor": 4}')),
    ("eval-rope-scaling-type-not-text", _eval("--rope-scaling", '{"rope_type": 5, "factor": 2}')),
    ("eval-rope-scaling-yarn-no-factor", _eval("--rope-scaling", '{"rope_type": "yarn"}')),
    ("eval-rope-scaling-llama3-missing", _eval("--rope-scaling", '{"rope_type": "llama3", "factor": 4}')),
    ("eval-rope-scaling-longrope-missing", _eval("--rope-scaling", '{"rope_type": "longrope", "factor": 4}')),
    ("eval-rope-scaling-text-number", _eval("--rope-scaling", '{"rope_type": "yarn", "factor": 4, "beta_fast": "x"}')),
    (
        "eval-rope-scaling-original-text",
        _eval("--rope-scaling", '{"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": "x"}'),
    ),
    (
        "eval-rope-scaling-factor-list-junk",
        _eval("--rope-scaling", '{"rope_type": "longrope", "short_factor": [1, "a"], "long_factor": [1]}'),
    ),
    # ---- eval: tasks, checkpoints, output
    ("eval-unknown-task", _eval("--tasks", "no_such_task")),
    ("eval-unknown-suite", _eval_no("--tasks", "--suite", "no_such_suite")),
    ("eval-no-checkpoints", _eval_no("--ckpts")),
    ("eval-ckpts-missing", _eval(ckpts="nope")),
    ("eval-ckpts-random-weights", _eval(ckpts="ckpt-noise")),
    ("eval-ckpts-truncated-weights", _eval(ckpts="ckpt-trunc")),
    ("eval-ckpts-garbage-config", _eval(ckpts="ckpt-badcfg")),
    ("eval-ckpts-garbage-tokenizer", _eval(ckpts="ckpt-badtok")),
    ("eval-ckpts-no-tokenizer", _eval(ckpts="ckpt-notok")),
    ("eval-ckpts-empty-dir", _eval(ckpts="ckpt-empty")),
    ("eval-ckpts-mixed-tokenizers", _eval(ckpts="ckpt,ckpt-notok")),
    ("eval-out-is-a-file", EVAL + ["--out", "afile", "--no-progress"]),
    ("eval-out-under-a-file", EVAL + ["--out", "afile/sub", "--no-progress"]),
    ("eval-cache-under-a-file", EVAL + ["--out", "fresh-out", "--cache-dir", "afile/cache", "--no-progress"]),
    ("eval-out-corrupt-store", EVAL + ["--out", "store-corrupt", "--no-progress"]),
    # ---- generate
    ("generate-samples-0", GEN + ["--samples", "0"] + GEN_OUT),
    ("generate-samples-negative", GEN + ["--samples=-1"] + GEN_OUT),
    ("generate-seed-negative", GEN + ["--seed=-1"] + GEN_OUT),
    ("generate-samples-text", GEN + ["--samples", "x"] + GEN_OUT),
    ("generate-lengths-equals-negative", GEN + ["--lengths=-1k"] + GEN_OUT),
    ("generate-lengths-space-negative", GEN + ["--lengths", "-1k"] + GEN_OUT),
    ("generate-lengths-reversed", GEN + ["--lengths", "2k-1k"] + GEN_OUT),
    ("generate-lengths-not-doubling", GEN + ["--lengths", "3k-16k"] + GEN_OUT),
    ("generate-lengths-above-maximum", GEN + ["--lengths", "2m"] + GEN_OUT),
    ("generate-unknown-task", GEN + ["--tasks", "nope"] + GEN_OUT),
    ("generate-tokenizer-missing", GEN + ["--tokenizer", "nope/"] + GEN_OUT),
    ("generate-tokenizer-garbage", GEN + ["--tokenizer", "ckpt-badtok"] + GEN_OUT),
    ("generate-out-is-a-file", GEN + ["--out", "afile"]),
    ("generate-no-out", GEN),
    ("generate-no-lengths", ["generate", "--tasks", "niah_single_1", "--out", "out-gen"]),
    ("generate-unknown-flag", GEN + GEN_OUT + ["--frobnicate"]),
    # ---- report
    *[(f"report-{name}", ["report", f"results/{name}.json"]) for name in BAD_RESULTS],
    ("report-missing-file", ["report", "results/nope.json"]),
    ("report-dir-without-results", ["report", "rundir-empty"]),
    ("report-corrupt-store", ["report", "store-corrupt"]),
    ("report-newer-store", ["report", "store-foreign.jsonl"]),
    ("report-store-bad-types", ["report", "store-badtypes"]),
    ("report-store-without-header", ["report", "store-noheader.jsonl"]),
    ("eval-out-store-bad-types", EVAL + ["--out", "store-badtypes", "--no-progress"]),
    ("report-threshold-nan", ["report", "results/good.json", "--threshold", "nan"]),
    ("report-threshold-negative", ["report", "results/good.json", "--threshold=-1"]),
    ("report-threshold-above-100", ["report", "results/good.json", "--threshold", "101"]),
    ("report-threshold-text", ["report", "results/good.json", "--threshold", "high"]),
    ("report-no-results", ["report"]),
    # ---- leaderboard
    *[(f"leaderboard-{name}", ["leaderboard", f"results/{name}.json", "--out", "out-lb"]) for name in LEADERBOARD_BAD],
    ("leaderboard-threshold-nan", LB + ["--threshold", "nan"]),
    ("leaderboard-threshold-negative", LB + ["--threshold=-5"]),
    ("leaderboard-threshold-above-100", LB + ["--threshold", "200"]),
    ("leaderboard-threshold-inf", LB + ["--threshold", "inf"]),
    ("leaderboard-unknown-baseline", LB + ["--baseline", "nope"]),
    ("leaderboard-out-is-a-file", ["leaderboard", "results/good.json", "--out", "afile"]),
    ("leaderboard-no-out", ["leaderboard", "results/good.json"]),
    ("leaderboard-missing-results", ["leaderboard", "results/nope.json", "--out", "out-lb"]),
    # ---- diagnose
    ("diagnose-delta2-negative", DIAG + ["--delta2=-1"] + DIAG_REST),
    ("diagnose-delta2-text", DIAG + ["--delta2", "x"] + DIAG_REST),
    ("diagnose-num-samples-0", DIAG + DIAG_REST + ["--num-samples", "0"]),
    ("diagnose-seq-len-0", DIAG + DIAG_REST + ["--seq-len", "0"]),
    ("diagnose-seq-len-text", DIAG + DIAG_REST + ["--seq-len", "long"]),
    ("diagnose-shifts-negative", DIAG + DIAG_REST + ["--shifts=-5"]),
    ("diagnose-logit-lengths-reversed", DIAG + DIAG_REST + ["--logit-lengths", "128-64"]),
    ("diagnose-dtype-unknown", DIAG + DIAG_REST + ["--dtypes", "fp8"]),
    ("diagnose-device-unknown", DIAG + DIAG_REST + ["--device", "tpu"]),
    ("diagnose-kernel-choice", DIAG + DIAG_REST + ["--kernel", "magic"]),
    ("diagnose-ckpt-missing", DIAG + DIAG_REST + ["--ckpt", "nope"]),
    ("diagnose-no-out", DIAG + DIAG_REST[:-2]),
    ("diagnose-no-diagnostic", ["diagnose"]),
    # ---- demo
    ("demo-lr-nan", DEMO + ["--lr", "nan"]),
    ("demo-lr-0", DEMO + ["--lr", "0"]),
    ("demo-lr-negative", DEMO + ["--lr=-1e-4"]),
    ("demo-rope-theta-negative", DEMO + ["--rope-theta=-1"]),
    ("demo-seed-negative", DEMO + ["--seed=-1"]),
    ("demo-window-0", DEMO + ["--window", "0"]),
    ("demo-steps-0", DEMO + ["--steps", "0"]),
    ("demo-save-every-0", DEMO + ["--save-every", "0"]),
    ("demo-keep-last-0", DEMO + ["--keep-last", "0"]),
    ("demo-batch-size-0", DEMO + ["--batch-size", "0"]),
    ("demo-samples-0", DEMO + ["--samples", "0"]),
    ("demo-corpus-docs-0", DEMO + ["--corpus-docs", "0"]),
    ("demo-eval-batch-size-0", DEMO + ["--eval-batch-size", "0"]),
    ("demo-warmup-negative", DEMO + ["--warmup=-1"]),
    ("demo-too-few-saves", DEMO + ["--steps", "10", "--save-every", "5", "--keep-last", "3"]),
    ("demo-unknown-mode", DEMO + ["--modes", "bogus"]),
    ("demo-repeated-mode", DEMO + ["--modes", "full,full"]),
    ("demo-lengths-negative", DEMO + ["--lengths=-1k"]),
    ("demo-unknown-task", DEMO + ["--tasks", "nope"]),
    ("demo-model-missing", DEMO + ["--model", "./nope"]),
    ("demo-data-missing", DEMO + ["--data", "nope.jsonl"]),
    ("demo-out-is-a-file", ["demo", "--out", "afile"]),
    ("demo-dtype-choice", DEMO + ["--dtype", "fp16"]),
    ("demo-window-text", DEMO + ["--window", "wide"]),
    # ==== issue 24, section 4 ====
    # ---- stored files: results.json fields of the wrong type or range (report cases above cover them all)
    *[(f"leaderboard-{name}", ["leaderboard", f"results/{name}.json", "--out", "out-lb"]) for name in BAD_RESULTS_2],
    *[(f"plan-{name}", ["plan", "--baseline", f"results/{name}.json", "--delta", "5"]) for name in BAD_RESULTS_2],
    # ---- stored files: samples.jsonl records of the wrong type or range
    *[(f"report-store-{name}", ["report", f"store-{name}"]) for name in [*BAD_RECORDS, "score-nan", "fifo"]],
    *[
        (f"eval-out-store-{name}", EVAL + ["--out", f"store-{name}", "--no-progress"])
        for name in [*BAD_RECORDS, "score-nan"]
    ],
    ("eval-out-store-fifo", EVAL + ["--out", "store-fifo", "--no-progress"]),
    ("report-results-fifo", ["report", "data/essays-fifo.txt"]),
    # ---- data files named by flags
    ("eval-essays-not-utf8", _eval("--tasks", "niah_single_2", "--essays", "data/essays-latin1.txt")),
    ("eval-essays-fifo", _eval("--tasks", "niah_single_2", "--essays", "data/essays-fifo.txt")),
    ("eval-essays-dir-with-fifo", _eval("--tasks", "niah_single_2", "--essays", "data/essays-dir")),
    ("eval-essays-json-list", _eval("--tasks", "niah_single_2", "--essays", "data/essays-list.json")),
    ("eval-essays-json-text-number", _eval("--tasks", "niah_single_2", "--essays", "data/essays-text-number.json")),
    ("generate-essays-not-utf8", GEN + ["--tasks", "niah_single_2", "--essays", "data/essays-latin1.txt"] + GEN_OUT),
    ("generate-essays-fifo", GEN + ["--tasks", "niah_single_2", "--essays", "data/essays-fifo.txt"] + GEN_OUT),
    ("eval-squad-fifo", _eval("--tasks", "qa_1", "--squad", "data/squad-fifo.json")),
    ("eval-squad-wrong-shape", _eval("--tasks", "qa_1", "--squad", "data/squad-shape.json")),
    ("eval-squad-impossible-string", _eval("--tasks", "qa_1", "--squad", "data/squad-impossible-string.json")),
    ("eval-hotpotqa-not-utf8", _eval("--tasks", "qa_2", "--hotpotqa", "data/hotpot-latin1.json")),
    *[
        (f"eval-longbench-{name}", _eval("--tasks", "trec", "--longbench", f"data/lb-{name}"))
        for name in ("answers-string", "length-string", "no-context", "latin1", "fifo")
    ],
    # ---- outputs stay where the user put them
    ("eval-name-dotdot", _eval_no("--out", "--name", "../../escaped")),
    ("eval-name-absolute", _eval_no("--out", "--name", "/tmp/escaped-run")),
    ("eval-name-carriage-return", _eval("--name", "run\r=HYPERLINK(1)")),
    ("eval-name-newline", _eval("--name", "a\nb")),
    ("eval-name-empty", _eval("--name", "")),
    ("eval-out-empty", EVAL + ["--out", "", "--no-progress"]),
    ("eval-out-control-char", EVAL + ["--out", "out\x07bell", "--no-progress"]),
    ("eval-results-json-is-a-dir", EVAL + ["--out", "out-resdir", "--no-progress"]),
    ("generate-out-empty", GEN + ["--out", ""]),
    ("leaderboard-out-empty", ["leaderboard", "results/good.json", "--out", ""]),
    ("leaderboard-index-is-a-dir", ["leaderboard", "results/good.json", "--out", "out-lbdir"]),
    ("diagnose-out-empty", DIAG + DIAG_REST[:-2] + ["--out", ""]),
    ("demo-out-empty", ["demo", "--out", ""]),
    ("demo-out-carriage-return", ["demo", "--out", "a\rb"]),
    # ---- a rejected command changes nothing
    ("demo-eval-arg-unknown", DEMO + ["--eval-arg=--bogus"]),
    ("demo-eval-arg-bad-value", DEMO + ["--eval-arg=--batch-size=0"]),
    ("demo-train-arg-unknown", DEMO + ["--train-arg=--bogus"]),
    ("demo-train-arg-nan", DEMO + ["--train-arg=--lr=nan"]),
    # ---- clean endings: bounded ranges, ASCII numbers, no duplicates, nothing written = exit 2
    ("generate-nothing-available", GEN[:2] + ["qa_1"] + GEN[3:] + GEN_OUT),
    ("generate-tasks-twice", GEN[:2] + ["vt,vt"] + GEN[3:] + GEN_OUT),
    ("eval-tasks-twice", _eval("--tasks", "vt,vt")),
    ("eval-exclude-twice", _eval_no("--tasks", "--suite", "ruler", "--exclude", "vt,vt")),
    ("eval-lengths-fullwidth", _eval("--lengths", "\uff11k")),
    ("eval-lengths-fullwidth-range", _eval("--lengths", "1k-\uff12k")),
    ("eval-samples-fullwidth", _eval("--samples", "\uff11")),
    ("eval-samples-huge", _eval("--samples", "99999999999")),
    ("eval-max-model-len-huge", _eval("--max-model-len", "4000000000")),
    ("eval-rope-theta-fullwidth", _eval("--rope-theta", "\uff15e5")),
    ("eval-request-timeout-huge", _eval("--request-timeout", "1e300")),
    # ---- flags accepted in silence before (issue 40): a served-only flag with hf, an empty value,
    # a --rope-scaling key transformers would ignore, a nesting the JSON parser cannot follow
    ("eval-concurrency-with-hf", _eval("--concurrency", "4")),
    ("eval-tokenizer-empty", _eval("--tokenizer", "")),
    ("eval-rope-scaling-unknown-key", _eval("--rope-scaling", '{"rope_type": "linear", "factor": 2, "facter": 3}')),
    ("eval-rope-scaling-deep", _eval("--rope-scaling", "[" * 30000 + "]" * 30000)),
    ("eval-protocol-unknown", _eval("--protocol", "published")),
    ("eval-max-new-tokens-fullwidth", _eval("--max-new-tokens", "\uff15")),
    ("eval-ckpts-fullwidth-range", _eval(ckpts="ckpt-<\uff11..\uff12>")),
    ("eval-with-progress-bad-lengths", EVAL[:5] + ["--lengths", "16k"] + EVAL[7:] + ["--out", "out-eval"]),
    ("generate-lengths-fullwidth", GEN[:4] + ["\uff11k"] + GEN[5:] + GEN_OUT),
    ("diagnose-delta2-huge", DIAG + ["--delta2", "99999999999999999999"] + DIAG_REST),
    ("diagnose-delta2-beyond-positions", DIAG + ["--delta2", "4000000000"] + DIAG_REST),
    ("diagnose-shifts-huge", DIAG + DIAG_REST + ["--shifts", "0,99999999999"]),
    ("diagnose-seq-len-huge", DIAG + DIAG_REST + ["--seq-len", "99999999999"]),
    ("diagnose-dtypes-twice", DIAG + DIAG_REST + ["--dtypes", "fp32,fp32"]),
    ("diagnose-seq-len-fullwidth", DIAG + DIAG_REST + ["--seq-len", "\uff11\uff12\uff18"]),
    ("plan-delta-tiny", ["plan", "--baseline", "results/good2.json", "--delta", "1e-300"]),
    ("plan-delta-huge", ["plan", "--baseline", "results/good2.json", "--delta", "1e300"]),
    ("plan-alpha-tiny", ["plan", "--baseline", "results/good2.json", "--delta", "5", "--alpha", "1e-300"]),
    (
        "plan-checkpoints-huge",
        ["plan", "--baseline", "results/good2.json", "--delta", "5", "--checkpoints", "4000000000"],
    ),
    ("demo-window-huge", DEMO + ["--window", "99999999999"]),
    ("demo-window-beyond-tokens", DEMO + ["--window", "4000000000"]),
    ("demo-samples-fullwidth", DEMO + ["--samples", "\uff18"]),
    ("demo-tasks-twice", DEMO + ["--tasks", "vt,vt"]),
]

# Cases that set HARNESS_* variables (data named by the environment instead of a flag).
ENV_CASES: list[tuple[str, list[str], dict[str, str]]] = [
    # a hub name with the hub out of reach: one line at once, not ~50 s of retries (harness/models/tokenization.py)
    ("eval-ckpts-hub-name-offline", _eval(ckpts="no-such-org/no-such-model"), {"HF_HUB_OFFLINE": "1"}),
    *[
        (f"eval-env-ppl-{name}", _eval("--tasks", "ppl"), {"HARNESS_PPL_DATA": f"data/ppl-{name}"})
        for name in (
            "rows-not-objects.jsonl",
            "bad-json-line.jsonl",
            "text-number.jsonl",
            "latin1.txt",
            "fifo.jsonl",
            "dir",
        )
    ],
    ("eval-env-essays-fifo", _eval("--tasks", "niah_single_2"), {"HARNESS_ESSAYS": "data/essays-fifo.txt"}),
    ("eval-env-essays-not-utf8", _eval("--tasks", "niah_single_3"), {"HARNESS_ESSAYS": "data/essays-latin1.txt"}),
    ("eval-env-longbench-fifo", _eval("--tasks", "trec"), {"HARNESS_LONGBENCH": "data/lb-fifo"}),
    *[
        (f"eval-env-{name}", _eval("--tasks", "icl_trec_coarse"), {"HARNESS_ICL_DATA": f"data/{name}"})
        for name in (
            "icl-label-string",
            "icl-label-negative",
            "icl-label-nan",
            "icl-labels-not-list",
            "icl-bad-json-line",
        )
    ],
    *[
        (f"eval-env-{name}", _eval("--tasks", "mmlu"), {"HARNESS_MMLU": f"data/{name}"})
        for name in ("mmlu-answer-out-of-range", "mmlu-choices-string")
    ],
    ("eval-env-hellaswag-label-text", _eval("--tasks", "hellaswag"), {"HARNESS_HELLASWAG": "data/hs-label-text"}),
    ("eval-env-threads-text", _eval(), {"HARNESS_THREADS": "many"}),
]


ALL_CASES = [(i, argv, {}) for i, argv in CASES] + ENV_CASES


def test_table_is_large_and_ids_unique():
    ids = [c[0] for c in ALL_CASES]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 300
    for cmd in ("generate", "eval", "report", "leaderboard", "diagnose", "demo", "plan"):
        assert any(i.startswith(cmd + "-") for i in ids), cmd


# What the one line must name for the section-4 classes: each case fails for its own reason, not an earlier one.
EXPECT = {
    "eval-out-under-a-file": "is under afile, which is a file: pass a path under a directory",
    "eval-cache-under-a-file": "afile is a file, not a directory",
    "eval-lengths-empty": "--lengths is empty",
    "eval-ckpts-hub-name-offline": "not in the hub cache, and the hub is unreachable: offline: HF_HUB_OFFLINE is set",
    "report-store-without-header": "is not a harness results store (its first line is not a store header): pass a samples.jsonl",
    "eval-rope-scaling-unknown-type": "rope_type 'bogus' is unknown",
    "eval-rope-scaling-yarn-no-factor": "needs factor",
    "eval-rope-scaling-llama3-missing": "needs low_freq_factor, high_freq_factor, original_max_position_embeddings",
    "eval-rope-scaling-text-number": "beta_fast 'x' is not a number",
    **{
        f"{cmd}-{name}": "does not follow the results.json schema"
        for name in BAD_RESULTS_2
        for cmd in ("report", "leaderboard", "plan")
    },
    **{
        f"{cmd}-store-{name}": "line 2 is corrupt"
        for name in [*BAD_RECORDS, "score-nan"]
        for cmd in ("report", "eval-out")
    },
    "eval-out-store-fifo": "is a FIFO",
    "report-results-fifo": "is a FIFO",
    "eval-essays-not-utf8": "essays-latin1.txt is not UTF-8 text (line 1",
    "eval-essays-fifo": "essays-fifo.txt is a FIFO",
    "eval-essays-dir-with-fifo": "essays-dir/b.txt is a FIFO",
    "eval-essays-json-list": "essays-list.json does not have the expected shape",
    "eval-essays-json-text-number": '"text": input should be a valid string',
    "generate-essays-not-utf8": "not UTF-8 text",
    "generate-essays-fifo": "is a FIFO",
    "eval-squad-fifo": "squad-fifo.json is a FIFO",
    "eval-squad-wrong-shape": "squad-shape.json does not have the expected shape",
    "eval-squad-impossible-string": "is_impossible",
    "eval-hotpotqa-not-utf8": "hotpot-latin1.json is not UTF-8 text",
    "eval-longbench-answers-string": 'trec.jsonl line 1: "answers"',
    "eval-longbench-length-string": 'trec.jsonl line 1: "length"',
    "eval-longbench-no-context": '"context" is missing',
    "eval-longbench-latin1": "is not UTF-8 text",
    "eval-longbench-fifo": "is a FIFO",
    "eval-name-dotdot": "would write outside results/",
    "eval-name-absolute": "would write outside results/",
    "eval-name-carriage-return": "control character '\\r'",
    "eval-name-newline": "control character '\\n'",
    "eval-name-empty": "--name is empty",
    "eval-out-empty": "--out is empty",
    "eval-out-control-char": "control character",
    "eval-results-json-is-a-dir": "results.json is a directory",
    "generate-out-empty": "--out is empty",
    "leaderboard-out-empty": "--out is empty",
    "leaderboard-index-is-a-dir": "index.html is a directory",
    "diagnose-out-empty": "--out is empty",
    "demo-out-empty": "--out is empty",
    "demo-out-carriage-return": "control character",
    "demo-eval-arg-unknown": "--eval-arg: harness: unrecognized arguments: --bogus",
    "demo-eval-arg-bad-value": "--batch-size 0 must be at least 1",
    "demo-train-arg-unknown": "--train-arg: harness: unrecognized arguments: --bogus",
    "demo-train-arg-nan": "--train-arg: harness train: argument --lr: nan is not a finite number",
    "generate-nothing-available": "no task can run: qa_1",
    "generate-tasks-twice": "--tasks names 'vt' twice",
    "eval-tasks-twice": "--tasks names 'vt' twice",
    "eval-exclude-twice": "--exclude names 'vt' twice",
    "eval-lengths-fullwidth": "bad length",
    "eval-lengths-fullwidth-range": "bad length",
    "eval-samples-fullwidth": "invalid int value",
    "eval-samples-huge": "out of range",
    "eval-max-model-len-huge": "--max-model-len 4000000000 must be at most",
    "eval-rope-theta-fullwidth": "invalid float value",
    "eval-request-timeout-huge": "--request-timeout 1e+300 must be at most",
    "eval-concurrency-with-hf": "--concurrency is for served models (--backend openai)",
    "eval-tokenizer-empty": "--tokenizer is empty",
    "eval-rope-scaling-unknown-key": "key 'facter' is not one rope_type 'linear' takes",
    "eval-rope-scaling-deep": "--rope-scaling is nested too deeply",
    "eval-protocol-unknown": "argument --protocol: invalid choice",
    "eval-max-new-tokens-fullwidth": "is not a whole number",
    "eval-ckpts-fullwidth-range": "no checkpoint matches",
    "generate-lengths-fullwidth": "bad length",
    "diagnose-delta2-huge": "out of range",
    "diagnose-delta2-beyond-positions": "--delta2 4000000000 must be at most",
    "diagnose-shifts-huge": "--shifts 99999999999 must be at most",
    "diagnose-seq-len-huge": "--seq-len 99999999999 must be at most",
    "diagnose-dtypes-twice": "'fp32' is listed twice",
    "diagnose-seq-len-fullwidth": "bad --seq-len value",
    "plan-delta-tiny": "--delta 1e-300 is outside",
    "plan-delta-huge": "--delta 1e+300 is outside",
    "plan-alpha-tiny": "--alpha 1e-300 is outside",
    "plan-checkpoints-huge": "--checkpoints 4000000000 is outside",
    "demo-window-huge": "out of range",
    "demo-window-beyond-tokens": "--window 4000000000 must be at most",
    "demo-samples-fullwidth": "invalid int value",
    "demo-tasks-twice": "--tasks names 'vt' twice",
    "eval-env-ppl-rows-not-objects.jsonl": "line 2 is not a JSON object",
    "eval-env-ppl-bad-json-line.jsonl": "line 2 is not valid JSON",
    "eval-env-ppl-text-number.jsonl": 'line 1: "text"',
    "eval-env-ppl-latin1.txt": "is not UTF-8 text",
    "eval-env-ppl-fifo.jsonl": "is a FIFO",
    "eval-env-ppl-dir": "doc.txt is a FIFO",
    "eval-env-essays-fifo": "is a FIFO",
    "eval-env-essays-not-utf8": "is not UTF-8 text",
    "eval-env-longbench-fifo": "is a FIFO",
    "eval-env-icl-label-string": '"label": input should be a valid integer',
    "eval-env-icl-label-negative": '"label": input should be greater than or equal to 0',
    "eval-env-icl-label-nan": '"label": input should be a valid integer',
    "eval-env-icl-labels-not-list": "labels.json does not have the expected shape",
    "eval-env-icl-bad-json-line": "line 2 is not valid JSON",
    "eval-env-mmlu-answer-out-of-range": "answer 7 is not an index of its 4 choices",
    "eval-env-mmlu-choices-string": '"choices": input should be a valid list',
    "eval-env-hellaswag-label-text": "label 'x' is not an ending's index",
    "eval-env-threads-text": "HARNESS_THREADS='many' is not a thread count",
}
# Variables a case (or eval's --essays/--squad/... flags, which set them) may leave behind.
DATA_VARS = [
    "HARNESS_ESSAYS",
    "HARNESS_SQUAD",
    "HARNESS_HOTPOTQA",
    "HARNESS_LONGBENCH",
    "HARNESS_PPL_DATA",
    "HARNESS_ICL_DATA",
    "HARNESS_MMLU",
    "HARNESS_HELLASWAG",
    "HARNESS_THREADS",
]


def test_every_expectation_names_a_case():
    assert set(EXPECT) <= {c[0] for c in ALL_CASES}


@pytest.mark.parametrize("case_id,argv,env", ALL_CASES, ids=[c[0] for c in ALL_CASES])
def test_bad_input_is_one_line_exit_2_and_changes_nothing(ws, case_id, argv, env, capsys, monkeypatch):
    monkeypatch.chdir(ws)
    for key in DATA_VARS:  # restored afterwards, whatever the command set (eval's --essays sets HARNESS_ESSAYS)
        monkeypatch.setenv(key, "")  # recorded, so the undo removes what the case leaves
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    outside = sorted(os.listdir(ws.parent))  # `--name ../../x` must not write beside the workspace
    before = _tree(ws)
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own errors (harness.cli._Parser.error)
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert EXPECT.get(case_id, "error: ") in lines[0]
    assert "Traceback" not in err
    assert _tree(ws) == before
    assert sorted(os.listdir(ws.parent)) == outside and not os.path.exists("/tmp/escaped-run")


def test_messages_name_the_problem(ws, capsys, monkeypatch):
    """A few messages in full: the bad value, the file, the fix; no --tokenizer for eval."""
    monkeypatch.chdir(ws)

    def err_of(argv):
        try:
            main(argv)
        except SystemExit:
            pass
        return capsys.readouterr().err

    assert "'-1k'" in err_of(_eval("--lengths=-1k")) and "negative" in err_of(_eval("--lengths=-1k"))
    assert "--lengths=VALUE" in err_of(_eval("--lengths", "-1k"))
    for ck in ("ckpt-badcfg", "ckpt-badtok", "ckpt-empty"):
        assert "--tokenizer" not in err_of(_eval(ckpts=ck)), ck
    assert "config.json" in err_of(_eval(ckpts="ckpt-badcfg"))
    assert "model.safetensors" in err_of(_eval(ckpts="ckpt-noise"))
    assert "--max-model-len 0" in err_of(_eval("--max-model-len", "0"))
    assert '"suites.ruler": input should be a valid dictionary' in err_of(["report", "results/suite-is-string.json"])
    # report and leaderboard say the same about the same file (one validator)
    report = err_of(["report", "results/lengths-null.json"])
    board = err_of(["leaderboard", "results/lengths-null.json", "--out", "out-lb"])
    assert report == board and 'suites.ruler.lengths"' in report


def test_a_run_rejected_after_opening_a_new_store_leaves_no_store(tiny_llama_dir, tmp_path, monkeypatch, capsys):
    """The store is opened before samples are generated and models load; a run rejected there (an
    unwritable sample cache, a model that fails to load) leaves no header-only samples.jsonl, and no
    --out folder it created. A store with records is never touched (tests of resumption keep them)."""
    from harness.pipeline import evaluate

    monkeypatch.chdir(tmp_path)
    argv = [
        "eval",
        "--ckpts",
        str(tiny_llama_dir),
        "--tasks",
        "vt",
        "--lengths",
        "1k",
        "--samples",
        "1",
        "--no-progress",
    ]
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the sample cache would go")
    assert main([*argv, "--out", "fresh", "--cache-dir", str(blocker / "cache")]) == 2
    assert "error: " in capsys.readouterr().err and not (tmp_path / "fresh").exists()

    def fails(plan):
        raise UserError("the model failed to load: a test")

    monkeypatch.setattr(evaluate, "execute", fails)
    assert main([*argv, "--out", "fresh2"]) == 2
    assert not (tmp_path / "fresh2" / "samples.jsonl").exists()  # the folder keeps the run lock only
    assert [p.name for p in (tmp_path / "fresh2").iterdir()] == [".eval.lock"]
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--out", "kept"]) == 0
    before = (tmp_path / "kept" / "samples.jsonl").read_bytes()
    monkeypatch.setattr(evaluate, "execute", fails)
    assert main([*argv, "--out", "kept", "--samples", "2"]) == 2
    assert (tmp_path / "kept" / "samples.jsonl").read_bytes() == before
