"""A full disk (a 3 MB tmpfs filled to the last page): eval and leaderboard end with one line
naming the path and the space, exit 2, keep everything finished and leave no temp files; the
previous leaderboard page survives byte for byte.

Needs root (mount); skipped otherwise, with the reason. The unit tests of harness.core.atomic that
simulate ENOSPC without a mount are in tests/eval_core/test_atomic.py.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from test_bad_input import GOOD  # a valid results.json

if os.geteuid() != 0:
    pytest.skip("the disk-full cases mount a 3 MB tmpfs, which needs root", allow_module_level=True)


@pytest.fixture
def tmpfs(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)], check=False, capture_output=True, text=True
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here (a container without CAP_SYS_ADMIN?): {done.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(mnt: Path) -> Path:
    """Write a filler file until the tmpfs refuses another byte."""
    filler = mnt / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for chunk in (65536, 4096, 1):
            while True:
                try:
                    os.write(fd, b"\0" * chunk)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    finally:
        os.close(fd)
    return filler


def _run(argv: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _one_line_disk_full(code: int, err: str, path: Path) -> None:
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: disk full writing "), err
    assert str(path) in lines[0] and "free" in lines[0] and "needs" in lines[0]
    assert "Traceback" not in err


def test_leaderboard_on_a_full_disk_keeps_the_previous_page(tmpfs, tmp_path, capsys):
    results = tmp_path / "good.json"
    results.write_text(json.dumps(GOOD))
    site = tmpfs / "site"
    code, err = _run(["leaderboard", str(results), "--out", str(site), "--title", "first"], capsys)
    assert code == 0, err
    before = _snapshot(site)
    assert "index.html" in before and b"first" in before["index.html"]
    filler = _fill(tmpfs)
    code, err = _run(["leaderboard", str(results), "--out", str(site), "--title", "second"], capsys)
    _one_line_disk_full(code, err, site)
    assert _snapshot(site) == before  # every old file whole, no temp file beside them
    filler.unlink()
    code, err = _run(["leaderboard", str(results), "--out", str(site), "--title", "second"], capsys)
    assert code == 0, err
    assert b"second" in (site / "index.html").read_bytes()
    # the same files as before (each a link into the one current generation), no temp left anywhere
    assert sorted(p.name for p in site.iterdir()) == sorted([n for n in before if "/" not in n] + [".generations"])
    assert len([n for n in os.listdir(site / ".generations") if n not in ("current", ".lock")]) == 1


@pytest.fixture(scope="module")
def two_ckpts(tmp_path_factory):
    from harness.pipeline.embedded_eval import ensure_checkpoints

    return ensure_checkpoints(tmp_path_factory.mktemp("embedded") / "runs", steps=(10, 20))


def _eval(ckpts: str, out: Path, samples: int) -> list[str]:
    return ["eval", "--ckpts", ckpts, "--tasks", "vt", "--lengths", "1k"] + [
        "--samples",
        str(samples),
        "--out",
        str(out),
        "--no-progress",
    ]


def test_eval_on_a_full_disk_keeps_every_finished_sample(tmpfs, two_ckpts, capsys):
    out = tmpfs / "run"
    code, err = _run(_eval(two_ckpts, out, 2), capsys)
    assert code == 0, err
    store = (out / "samples.jsonl").read_bytes()
    results = out / "results.json"
    results.unlink()
    filler = _fill(tmpfs)

    # nothing left to compute: only results.json is written, and does not fit
    code, err = _run(_eval(two_ckpts, out, 2), capsys)
    _one_line_disk_full(code, err, results)
    # more samples: a store append does not fit (the file's last page may still take the first
    # checkpoint's records; the store is filled to the byte, not to the page)
    code, err = _run(_eval(two_ckpts, out, 4), capsys)
    _one_line_disk_full(code, err, out / "samples.jsonl")
    kept = (out / "samples.jsonl").read_bytes()
    # finished records kept, whole records only (no torn tail), and not all of the new ones fitted
    assert kept.startswith(store) and kept.endswith(b"\n"), kept[-200:]
    assert all(json.loads(line)["type"] == "sample" for line in kept[len(store) :].splitlines())
    assert len(kept.splitlines()) < 1 + 2 * 4
    assert sorted(p.name for p in out.iterdir()) == [".eval.lock", "samples.jsonl"]  # no temp file

    filler.unlink()
    code, err = _run(_eval(two_ckpts, out, 4), capsys)
    assert code == 0, err
    lines = (out / "samples.jsonl").read_bytes()
    assert lines.startswith(store) and len(lines.splitlines()) == 1 + 2 * 4


def test_diagnose_on_a_full_disk_stops_before_loading_a_model(tmpfs, tiny_llama_dir, capsys, monkeypatch):
    """`diagnose rope` measures for minutes before it writes its report: on a disk without room for
    it, it stops first, in the same one line, with no progress bar before it and no model loaded."""
    from harness.commands import diagnose

    monkeypatch.setattr(diagnose, "_load_model", lambda *a, **k: pytest.fail("a model was loaded"))
    _fill(tmpfs)
    out = tmpfs / "diag"
    argv = ["diagnose", "rope", "--ckpt", str(tiny_llama_dir), "--seq-len", "128", "--num-samples", "1"]
    code, err = _run(argv + ["--logit-lengths", "64", "--text", "corpus", "--device", "cpu", "--out", str(out)], capsys)
    _one_line_disk_full(code, err, out / "rope_diagnostic.json")
    assert not out.exists()
