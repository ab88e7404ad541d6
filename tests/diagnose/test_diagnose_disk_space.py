"""`harness diagnose rope` checks --out's free space against what its report will need before any
work (issue 40): a disk that cannot take the report is refused in the one line a full disk gives
(`error: disk full writing ...`, exit 2), before any progress bar and before any model is loaded,
instead of after minutes of measuring. The disk is simulated with shutil.disk_usage; the same case
on a real full tmpfs (root only) is in tests/cli/test_disk_full.py."""

from __future__ import annotations

import shutil
from collections import namedtuple

import pytest

from harness.cli import main

_Usage = namedtuple("_Usage", "total used free")


def _argv(ckpt, out) -> list[str]:
    return [
        "diagnose",
        "rope",
        "--ckpt",
        str(ckpt),
        "--dtypes",
        "bf16,fp32",
        "--shifts",
        "0,16,500",
        "--seq-len",
        "128",
        "--num-samples",
        "2",
        "--logit-lengths",
        "64-128",
        "--kernel",
        "sdpa",
        "--device",
        "cpu",
        "--out",
        str(out),
    ]


def _free(monkeypatch, free: int) -> None:
    """Every disk reports `free` bytes free (harness.core.atomic.free_bytes asks shutil.disk_usage)."""
    monkeypatch.setattr(shutil, "disk_usage", lambda path: _Usage(10 * 2**30, 10 * 2**30 - free, free))


def _needed(argv: list[str]) -> int:
    from harness.cli import build_parser
    from harness.commands import diagnose

    args = build_parser().parse_args(argv)
    runs = len(args.ckpt) * len(args.dtypes.split(","))
    return diagnose.report_bytes(diagnose._settings(args), runs, args.num_samples, not args.no_plots)


def test_a_nearly_full_disk_is_refused_before_any_model_loads(tiny_llama_dir, tmp_path, monkeypatch, capsys):
    from harness.commands import diagnose

    loaded = []

    def no_model(*args, **kwargs):
        loaded.append(args)
        raise AssertionError("a model was loaded before the free space was checked")

    monkeypatch.setattr(diagnose, "_load_model", no_model)
    out = tmp_path / "diag"
    _free(monkeypatch, 100 * 1024)
    capsys.readouterr()
    rc = main(_argv(tiny_llama_dir, out))
    captured = capsys.readouterr()
    assert rc == 2
    assert captured.out == ""  # nothing printed before the error (and nothing after)
    lines = captured.err.splitlines()  # a progress bar's "\r" would split the output too
    assert len(lines) == 1, captured.err
    assert captured.err.startswith("error: disk full writing ")
    assert str(out / "rope_diagnostic.json") in lines[0] and "needs" in lines[0] and "100.0 KB free" in lines[0]
    assert not loaded and not out.exists()


def test_the_estimate_covers_the_report_it_lets_through(tiny_llama_dir, tmp_path, monkeypatch, capsys):
    """A disk with exactly the estimated room is enough, and the report written fits in it; the
    estimate stays realistic (a few times the report at this size, not orders of magnitude)."""
    out = tmp_path / "diag"
    argv = _argv(tiny_llama_dir, out)
    needed = _needed(argv)
    _free(monkeypatch, needed)
    assert main(argv) == 0, capsys.readouterr().err
    written = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    assert written <= needed <= 10 * written


@pytest.mark.parametrize("free_share, refused", [(0.99, True), (1.0, False)])
def test_the_line_is_drawn_at_the_estimate(tiny_llama_dir, tmp_path, monkeypatch, capsys, free_share, refused):
    from harness.commands import diagnose

    def stop(*args, **kwargs):  # past the check: no need to measure anything
        raise SystemExit(99)

    monkeypatch.setattr(diagnose, "_measure_all", stop)
    argv = _argv(tiny_llama_dir, tmp_path / "diag")
    _free(monkeypatch, int(_needed(argv) * free_share))
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    assert rc == (2 if refused else 99)
    assert ("disk full" in capsys.readouterr().err) == refused
