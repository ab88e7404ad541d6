"""`harness doctor` on the round-5 attack's findings (issue 49):

- a checkpoint `harness train` trained at a 1,024-token window whose config.json claims 131,072
  positions (its base model's) was "PASS 131072 positions cover every length": now a WARN naming
  the window, when the run's lengths go past it (not a FAIL: evaluating past the training window
  is what length-extrapolation studies do, and the base model may have been trained that long);
- a config claiming 10^30 positions (more than any model) was a PASS: now a FAIL;
- a flag's own mistake (a length outside 250..1m, an unknown task or suite, --tasks outside
  --suite) was "FAIL model", exit 1: now one line, exit 2, as `harness eval` says it."""

from __future__ import annotations

import json
import shutil

import pytest

from harness.cli import main


def _trained(tiny_llama_dir, dst, positions: int, window: int = 1024):
    shutil.copytree(tiny_llama_dir, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["max_position_embeddings"] = positions
    (dst / "config.json").write_text(json.dumps(cfg))
    (dst / "harness_training.json").write_text(json.dumps({"schema_version": 1, "mode": "anchor", "window": window}))
    return dst


def _doctor(model, lengths, capsys):
    rc = main(["doctor", "--ckpts", str(model), "--tasks", "vt", "--lengths", lengths, "--canaries", "0"])
    out = capsys.readouterr().out
    return rc, {line[6:22].strip(): line for line in out.splitlines() if line[:4] in ("PASS", "WARN", "FAIL")}


def test_lengths_past_the_trained_window_are_named(tiny_llama_dir, tmp_path, capsys):
    model = _trained(tiny_llama_dir, tmp_path / "ckpt-100", 131072)
    rc, lines = _doctor(model, "1k,4k", capsys)
    assert rc == 0  # a WARN: the run may go on
    warn = lines["trained length"]
    assert warn.startswith("WARN") and "1024-token window" in warn and "131072 positions" in warn
    assert "harness_training.json" in warn and "4K" in warn


def test_lengths_within_the_trained_window_say_nothing(tiny_llama_dir, tmp_path, capsys):
    model = _trained(tiny_llama_dir, tmp_path / "ckpt-100", 131072, window=4096)
    rc, lines = _doctor(model, "1k,4k", capsys)
    assert rc == 0 and "trained length" not in lines
    assert lines["rope"].startswith("PASS")


def test_a_plain_model_without_training_record_gets_no_window_line(tiny_llama_dir, capsys):
    rc, lines = _doctor(tiny_llama_dir, "1k,4k", capsys)
    assert rc == 0 and "trained length" not in lines


@pytest.mark.parametrize("positions", [10**30, 2**24 + 1])
def test_positions_no_model_has_fail(positions, tiny_llama_dir, tmp_path, capsys):
    model = _trained(tiny_llama_dir, tmp_path / "ckpt-100", positions)
    rc, lines = _doctor(model, "1k", capsys)
    assert rc == 1
    assert lines["rope"].startswith("FAIL") and f"claims {positions} positions" in lines["rope"]


@pytest.mark.parametrize(
    ("flags", "phrase"),
    [
        (["--tasks", "vt", "--lengths", "3"], "outside 250..1048576"),
        (["--tasks", "vt", "--lengths", "2m"], "outside 250..1048576"),
        (["--tasks", "no_such_task", "--lengths", "1k"], "unknown task 'no_such_task'"),
        (["--suite", "no_such_suite", "--lengths", "1k"], "unknown suite 'no_such_suite'"),
        (["--suite", "ruler", "--tasks", "vt,mmlu", "--lengths", "1k"], "not in --suite ruler"),
        (["--tasks", "vt", "--exclude", "zz", "--lengths", "1k"], "unknown task 'zz'"),
        (["--exclude", "vt", "--lengths", "1k"], "--exclude without --suite or --tasks"),
    ],
)
def test_usage_errors_are_one_line_exit_2(flags, phrase, tiny_llama_dir, capsys):
    assert main(["doctor", "--ckpts", str(tiny_llama_dir), *flags, "--canaries", "0"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("error: ") and phrase in err and err.count("\n") == 0, err
    assert "FAIL" not in captured.out


def test_a_broken_model_is_still_a_fail_of_the_model(tmp_path, capsys):
    """Only the flags' mistakes moved: a model that does not load stays FAIL model, exit 1."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{not json")
    assert main(["doctor", "--ckpts", str(tmp_path / "m"), "--tasks", "vt", "--lengths", "1k", "--canaries", "0"]) == 1
    out = capsys.readouterr().out
    assert any(line.startswith("FAIL  model") for line in out.splitlines())
