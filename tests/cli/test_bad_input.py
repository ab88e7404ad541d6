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
from pathlib import Path

import pytest

from harness.cli import main
from harness.results_schema import SCHEMA_VERSION


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
    (root / "afile").write_text("a file where a directory is expected\n")
    (root / "text.bin").write_bytes(bytes(range(256)))
    return root


def _tree(root: Path) -> dict[str, str]:
    """Every path under root with a content digest (size+mtime+inode for large files: cheap)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root) + "/"] = "dir"
        for f in filenames:
            p = os.path.join(dirpath, f)
            st = os.stat(p)
            if st.st_size > 65536:
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
]


def test_table_is_large_and_ids_unique():
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 80
    for cmd in ("generate", "eval", "report", "leaderboard", "diagnose", "demo"):
        assert any(i.startswith(cmd + "-") for i in ids), cmd


@pytest.mark.parametrize("argv", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_changes_nothing(ws, argv, capsys, monkeypatch):
    monkeypatch.chdir(ws)
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
    assert "Traceback" not in err
    assert _tree(ws) == before


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
