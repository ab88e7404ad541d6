"""`harness train` on bad input: one line `error: ...` on stderr, exit 2, no traceback, nothing changed.

One table, one test: each case builds its bad input (a flag, a damaged model, data file or run
directory), runs the CLI in this process with file-descriptor capture (so anything a library
prints to stderr counts too), and checks the output directory's tree hash before and after: a
refused run must not create, change or delete anything there.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.cli import main


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    from training.corpus import write_corpus

    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.jsonl", 20, seed=0, max_words=300)


def _args(model, data, out, *extra) -> list[str]:
    return [
        "train",
        "--model",
        str(model),
        "--data",
        str(data),
        "--out",
        str(out),
        "--mode",
        "anchor",
        "--window",
        "64",
        "--steps",
        "1",
        "--dtype",
        "fp32",
        "--max-docs",
        "20",
        "--save-every",
        "1",
        "--no-progress",
        *extra,
    ]


@pytest.fixture(scope="module")
def finished_run(tiny_llama_dir, corpus, tmp_path_factory) -> Path:
    """A run trained to its last step (ckpt-1, state/step-1, state/latest, log.jsonl)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    assert main(_args(tiny_llama_dir, corpus, out)) == 0
    assert (out / "state" / "latest").read_text().strip() == "step-1"
    return out


def tree_hash(root: Path) -> dict[str, str] | None:
    """relative path -> sha256 of every file (and "dir" for directories); None when root is absent."""
    if not root.exists():
        return None
    if root.is_file():
        return {".": hashlib.sha256(root.read_bytes()).hexdigest()}
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for d in dirs:
            out[os.path.relpath(os.path.join(dirpath, d), root)] = "dir"
        for f in files:
            p = os.path.join(dirpath, f)
            if not os.path.isfile(p):  # a FIFO: never read
                out[os.path.relpath(p, root)] = "special"
                continue
            out[os.path.relpath(p, root)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


# ---------------------------------------------------------------- how each case damages its input


def _model_copy(tmp: Path, model: Path) -> Path:
    dst = tmp / "model"
    shutil.copytree(model, dst)
    return dst


def _random_bytes(n: int) -> bytes:
    return hashlib.sha256(b"seed").digest() * (n // 32 + 1)


def model_empty(tmp, model):
    (tmp / "empty-model").mkdir()
    return tmp / "empty-model"


def model_garbage_config(tmp, model):
    m = _model_copy(tmp, model)
    (m / "config.json").write_bytes(b"\x00\xffnot json")
    return m


def model_config_list(tmp, model):
    m = _model_copy(tmp, model)
    (m / "config.json").write_text("[1, 2]")
    return m


def model_random_safetensors(tmp, model):
    m = _model_copy(tmp, model)
    (m / "model.safetensors").write_bytes(_random_bytes(4096))
    return m


def model_truncated_safetensors(tmp, model):
    m = _model_copy(tmp, model)
    data = (m / "model.safetensors").read_bytes()
    (m / "model.safetensors").write_bytes(data[: len(data) // 2])
    return m


def model_tiny_safetensors(tmp, model):
    m = _model_copy(tmp, model)
    (m / "model.safetensors").write_bytes(b"\x01\x02")
    return m


def model_no_weights(tmp, model):
    m = _model_copy(tmp, model)
    (m / "model.safetensors").unlink()
    return m


def model_no_tokenizer(tmp, model):
    m = _model_copy(tmp, model)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (m / name).unlink(missing_ok=True)
    return m


def model_incomplete_checkpoint(tmp, model):
    from harness.models.checkpoints import IN_PROGRESS_FILE

    m = _model_copy(tmp, model)
    (m / IN_PROGRESS_FILE).write_text("")
    return m


def _data(name: str, content: bytes) -> Callable:
    def make(tmp, corpus):
        path = tmp / name
        path.write_bytes(content)
        return path

    return make


def data_garbage_parquet(tmp, corpus):
    path = tmp / "corpus.parquet"
    path.write_bytes(b"PAR1" + _random_bytes(2000))
    return path


def data_truncated_parquet(tmp, corpus):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp / "corpus.parquet"
    pq.write_table(pa.table({"text": ["a b c d"] * 50}), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 20])
    return path


def data_garbage_npy(tmp, corpus):
    return _data("tokens.npy", _random_bytes(300))(tmp, corpus)


def run_done(tmp, finished):
    out = tmp / "run"
    shutil.copytree(finished, out)
    return out


def run_latest_garbage(tmp, finished):
    out = run_done(tmp, finished)
    (out / "state" / "latest").write_text("garbage, not a state\n")
    return out


def run_latest_binary(tmp, finished):
    out = run_done(tmp, finished)
    (out / "state" / "latest").write_bytes(_random_bytes(64))
    return out


def run_latest_missing_step(tmp, finished):
    out = run_done(tmp, finished)
    (out / "state" / "latest").write_text("step-7\n")
    return out


def run_state_truncated(tmp, finished):
    out = run_done(tmp, finished)
    state = out / "state" / "step-1" / "state.pt"
    state.write_bytes(state.read_bytes()[:1000])
    return out


def run_state_empty(tmp, finished):
    out = run_done(tmp, finished)
    (out / "state" / "step-1" / "state.pt").write_bytes(b"")
    return out


def out_is_file(tmp, finished):
    path = tmp / "run.txt"
    path.write_text("not a directory\n")
    return path


def out_under_file(tmp, finished):
    (tmp / "blocker").write_text("a file\n")
    return tmp / "blocker" / "run"


def model_inside_out(tmp, model):
    """The base model sits inside the directory given as --out (out_contains_model)."""
    dst = tmp / "run" / "base"
    dst.parent.mkdir()
    shutil.copytree(model, dst)
    return dst


def out_contains_model(tmp, finished):
    return tmp / "run"


def model_here(tmp, model):
    return _model_copy(tmp, model)


def out_is_model(tmp, finished):
    return tmp / "model"


def out_inside_model(tmp, finished):
    return tmp / "model" / "run"


def out_symlink_to_model(tmp, finished):
    (tmp / "link").symlink_to(tmp / "model")
    return tmp / "link" / "sub"


def data_fifo(tmp, corpus):
    os.mkfifo(tmp / "corpus.jsonl")
    return tmp / "corpus.jsonl"


def data_dir_with_fifo(tmp, corpus):
    (tmp / "data").mkdir()
    shutil.copy(corpus, tmp / "data" / "a.jsonl")
    os.mkfifo(tmp / "data" / "corpus.jsonl")
    return tmp / "data"


@dataclass
class Case:
    id: str
    expect: str
    extra: list[str] = field(default_factory=list)
    model: Callable | None = None  # (tmp, tiny model dir) -> model dir
    data: Callable | None = None  # (tmp, corpus path) -> data path
    out: Callable | None = None  # (tmp, finished run) -> --out


CASES = [
    # numeric flags: a lower bound, NaN and infinity rejected
    Case("lr-nan", "argument --lr: nan is not a finite number", ["--lr", "nan"]),
    Case("lr-inf", "argument --lr: inf is not a finite number", ["--lr", "inf"]),
    Case("lr-zero", "--lr 0.0 must be greater than 0", ["--lr", "0"]),
    Case("lr-negative", "--lr -0.001", ["--lr=-1e-3"]),
    Case("weight-decay-negative", "--weight-decay -0.1", ["--weight-decay", "-0.1"]),
    Case("weight-decay-nan", "argument --weight-decay: nan is not", ["--weight-decay", "nan"]),
    Case("betas-above-one", "each beta must be below 1", ["--betas", "1.5,0.9"]),
    Case("betas-nan", "--betas nan", ["--betas", "nan,0.9"]),
    Case("betas-negative", "--betas -0.1", ["--betas=-0.1,0.9"]),
    Case("max-grad-norm-negative", "--max-grad-norm -1", ["--max-grad-norm", "-1"]),
    Case("max-grad-norm-inf", "argument --max-grad-norm: inf is not", ["--max-grad-norm", "inf"]),
    Case("rope-theta-negative", "--rope-theta -1", ["--rope-theta", "-1"]),
    Case("rope-theta-zero", "--rope-theta 0.0", ["--rope-theta", "0"]),
    Case("rope-theta-nan", "argument --rope-theta: nan is not", ["--rope-theta", "nan"]),
    Case("steps-zero", "--steps 0", ["--steps", "0"]),
    Case("window-too-small", "--window 8", ["--window", "8"]),
    Case("batch-size-zero", "--batch-size 0", ["--batch-size", "0"]),
    Case("grad-accum-zero", "--grad-accum 0", ["--grad-accum", "0"]),
    Case("save-every-zero", "--save-every 0", ["--save-every", "0"]),
    Case("keep-last-negative", "--keep-last -1", ["--keep-last", "-1"]),
    Case("warmup-negative", "--warmup -1", ["--warmup", "-1"]),
    Case("save-state-every-zero", "--save-state-every 0", ["--save-state-every", "0"]),
    Case("interleave-chunks-zero", "--interleave-chunks 0", ["--interleave-chunks", "0"]),
    Case("max-docs-zero", "--max-docs 0", ["--max-docs", "0"]),
    Case("seed-negative", "--seed -1", ["--seed", "-1"]),
    Case("sp-zero", "--sp 0", ["--sp", "0"]),
    Case("sp-without-processes", "--sp 2 needs 2 processes", ["--sp", "2"]),
    Case("interleave-with-full-mode", "--interleave-chunks works with", ["--mode", "full", "--interleave-chunks", "2"]),
    Case("mixture-without-tokens", "tokens=N", ["--mixture", "C4=1"]),
    Case("mixture-infinite-tokens", "takes a finite number", ["--mixture", "tokens=inf"]),
    Case("kernel-varlen-on-cpu", "varlen attention is CUDA-only", ["--kernel", "varlen"]),
    # data
    Case("data-missing", "data not found", data=lambda tmp, c: tmp / "nope" / "corpus.jsonl"),
    Case("data-empty-list", "--data is empty", data=lambda tmp, c: ","),
    Case("data-binary-garbage", "not UTF-8 text", data=_data("corpus.jsonl", b"\x80\x81\xfe\xff" * 500)),
    Case("data-garbage-parquet", "not a readable parquet file", data=data_garbage_parquet),
    Case("data-truncated-parquet", "not a readable parquet file", data=data_truncated_parquet),
    Case("data-invalid-json-line", "not valid JSON", data=_data("corpus.jsonl", b'{"text": "a"}\n{"text": \n')),
    Case("data-json-array-line", "not an object", data=_data("corpus.jsonl", b"[1, 2, 3]\n")),
    Case("data-unsupported-suffix", "unsupported data file", data=_data("corpus.txt", b"plain text\n")),
    Case("data-garbage-gzip", "not a gzip file", data=_data("corpus.jsonl.gz", b"not gzip at all\n" * 10)),
    Case("data-garbage-npy", "not a token shard", data=data_garbage_npy),
    Case("data-odd-bin", "not a token shard", data=_data("tokens.bin", b"\x01\x02\x03")),
    Case("text-field-missing", "text field 'body'", ["--text-field", "body"]),
    Case("domain-field-missing", "no domain field 'nope'", ["--domain-tags", "nope"]),
    # model
    Case("model-missing", "model not found", model=lambda tmp, m: tmp / "no" / "such-model"),
    Case("model-empty-dir", "has no config.json", model=model_empty),
    Case("model-garbage-config", "config.json is not valid JSON", model=model_garbage_config),
    Case("model-config-not-object", "config.json is not a JSON object", model=model_config_list),
    Case("model-random-safetensors", "model.safetensors is damaged", model=model_random_safetensors),
    Case("model-truncated-safetensors", "model.safetensors is damaged (truncated", model=model_truncated_safetensors),
    Case("model-two-byte-safetensors", "model.safetensors is damaged", model=model_tiny_safetensors),
    Case("model-no-weights", "has no weights", model=model_no_weights),
    Case("model-incomplete-checkpoint", "is an incomplete checkpoint", model=model_incomplete_checkpoint),
    Case("model-no-tokenizer", "the tokenizer files must be in the --model directory", model=model_no_tokenizer),
    # output / run directory
    Case("out-is-a-file", "--out", out=out_is_file),
    Case("out-under-a-file", "which is a file: pass a path under a directory", out=out_under_file),
    Case("state-latest-garbage", "not a state name", out=run_latest_garbage),
    Case("state-latest-binary", "unreadable bytes", out=run_latest_binary),
    Case("state-latest-names-missing-step", "names step-7", out=run_latest_missing_step),
    Case("state-truncated-no-older-state", "no readable training state", out=run_state_truncated),
    Case("state-empty-no-older-state", "no readable training state", out=run_state_empty),
    Case("resume-with-other-settings", "holds a run with other settings (window)", ["--window", "128"], out=run_done),
    # ==== issue 24, section 4 ====
    # outputs stay where the user put them: never into (or around) the base model
    Case("out-is-the-model", "is the --model directory", model=model_here, out=out_is_model),
    Case("out-inside-the-model", "lies inside --model", model=model_here, out=out_inside_model),
    Case("out-contains-the-model", "contains --model", model=model_inside_out, out=out_contains_model),
    Case("out-symlink-into-the-model", "lies inside --model", model=model_here, out=out_symlink_to_model),
    Case("out-empty", "--out is empty", out=lambda tmp, f: ""),
    Case("out-carriage-return", "control character", out=lambda tmp, f: tmp / "run\rx"),
    # bounded, finite, ASCII numbers
    Case("window-huge", "argument --window: 99999999999 is out of range", ["--window", "99999999999"]),
    Case("window-beyond-tokens", "--window 4000000000 must be at most", ["--window", "4000000000"]),
    Case("window-fullwidth", "argument --window: invalid int value", ["--window", "\uff16\uff14"]),
    Case("steps-fullwidth", "argument --steps: invalid int value", ["--steps", "\uff11"]),
    Case("lr-fullwidth", "argument --lr: invalid float value", ["--lr", "\uff11e-5"]),
    Case("betas-fullwidth", "--betas", ["--betas", "\uff10.9,0.95"]),
    Case("batch-size-huge", "--batch-size 4000000000 must be at most", ["--batch-size", "4000000000"]),
    Case("interleave-beyond-window", "--interleave-chunks 65 must be at most 64", ["--interleave-chunks", "65"]),
    Case("mixture-fullwidth-tokens", "takes a finite number", ["--mixture", "tokens=\uff11000"]),
    # data that would hang or is not text
    Case("data-fifo", "corpus.jsonl is a FIFO", data=data_fifo),
    Case("data-dir-with-fifo", "corpus.jsonl is a FIFO", data=data_dir_with_fifo),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_train_input_is_one_clean_line(case, tiny_llama_dir, corpus, finished_run, tmp_path, capfd):
    if case.id == "kernel-varlen-on-cpu":
        import torch

        if torch.cuda.is_available():
            pytest.skip("varlen trains on CUDA: this case is about a CPU-only machine")
    model = case.model(tmp_path, Path(tiny_llama_dir)) if case.model else tiny_llama_dir
    data = case.data(tmp_path, corpus) if case.data else corpus
    out = case.out(tmp_path, finished_run) if case.out else tmp_path / "run"
    before = tree_hash(Path(out)) if str(out) else None
    around = tree_hash(tmp_path)  # the model, the data and anything the run could write beside them
    capfd.readouterr()
    try:
        code = main(_args(model, data, out, *case.extra))
    except SystemExit as exc:  # argparse's own errors (harness.cli._Parser.error)
        code = exc.code
    err = capfd.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert case.expect in lines[0], lines[0]
    assert "Traceback" not in err and "--tokenizer" not in err, err  # train has no --tokenizer flag
    assert (tree_hash(Path(out)) if str(out) else None) == before, "the refused run changed its output directory"
    assert tree_hash(tmp_path) == around, "the refused run changed a file beside it (the base model?)"


def test_case_table_is_large_and_unique():
    assert len(CASES) >= 75 and len({c.id for c in CASES}) == len(CASES)


def test_second_writer_is_refused_naming_the_holder(tiny_llama_dir, corpus, finished_run, tmp_path, capfd):
    """A live holder of the run's lock (pid, host recorded in it) makes a second train stop at once."""
    from training.runlock import LOCK_NAME

    out = run_done(tmp_path, finished_run)
    fd = os.open(out / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": "now"}).encode())
        before = tree_hash(out)
        capfd.readouterr()
        assert main(_args(tiny_llama_dir, corpus, out, "--steps", "2")) == 2
        err = capfd.readouterr().err.strip()
        assert err.count("\n") == 0 and err.startswith("error: "), err
        assert f"pid {os.getpid()} on host {socket.gethostname()}" in err, err
        assert tree_hash(out) == before
    finally:
        os.close(fd)
