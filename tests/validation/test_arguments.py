"""The one argument validator (harness/core/validate.py), the one output path check (harness/core/paths.py)
and how the CLI ends: ASCII, finite, bounded numbers for every int/float flag of every subcommand;
run names that stay under results/; `| head` without a traceback; one line for any error."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import build_parser, main
from harness.core.errors import UserError
from harness.core.paths import check_apart, check_out, check_run_name, results_dir
from harness.core.validate import INT_LIMIT, ascii_float, ascii_int, integer, number, unique_list

FULLWIDTH = ["\uff11", "\uff14k", "\u0664", "\u00b2", "1\u00b2", "\uff11.5"]  # str.isdigit takes most of these


@pytest.mark.parametrize("text", FULLWIDTH + ["", " ", "1_000", "0x10", "1e3", "١٢"])
def test_integers_are_ascii_digits(text):
    with pytest.raises(ValueError):
        ascii_int(text)


@pytest.mark.parametrize("text,value", [("42", 42), (" -7 ", -7), ("+3", 3), ("0", 0)])
def test_ascii_integers_read_as_int_does(text, value):
    assert ascii_int(text) == integer(text) == value


def test_integers_are_bounded():
    assert integer(str(INT_LIMIT)) == INT_LIMIT
    for text in (str(INT_LIMIT + 1), "-" + str(INT_LIMIT + 1), "99999999999"):
        with pytest.raises(argparse.ArgumentTypeError, match="out of range"):
            integer(text)


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "Infinity", "1e999"])
def test_floats_are_finite(text):
    ascii_float(text)  # readable ...
    with pytest.raises(argparse.ArgumentTypeError, match="not a finite number"):
        number(text)  # ... but not a flag value


@pytest.mark.parametrize("text", FULLWIDTH + ["1,5", "1_0.5", "", "e5"])
def test_floats_are_ascii(text):
    with pytest.raises(ValueError):
        ascii_float(text)


def test_every_numeric_flag_of_every_subcommand_goes_through_the_validator():
    """The parser's type registry maps int and float to integer and number, so a flag declared
    type=int anywhere (today's or tomorrow's) is checked: walk every action of every subparser."""
    parser = build_parser()
    checked = 0

    def walk(p: argparse.ArgumentParser):
        nonlocal checked
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)
            elif action.type in (int, float):
                assert p._registry_get("type", action.type, None) in (integer, number), action.option_strings
                checked += 1

    walk(parser)
    assert checked >= 40


def test_unique_list():
    check = unique_list("--dtypes")
    assert check("bf16,fp32") == "bf16,fp32"
    with pytest.raises(argparse.ArgumentTypeError, match="'fp32' is listed twice"):
        check("fp32, fp32")


@pytest.mark.parametrize(
    "name",
    [
        "../x",
        "../../x",
        "/abs",
        "a/b",
        "a\\b",
        ".",
        "..",
        "",
        "  ",
        "a\rb",
        "a\nb",
        "a\tb",
        "a\x00b",
        "a\u2028b",
        "x" * 300,
    ],
)
def test_run_names_stay_one_printable_component(name):
    with pytest.raises(UserError) as exc:
        results_dir(name)
    assert "\n" not in str(exc.value) and "\r" not in str(exc.value)


@pytest.mark.parametrize("name", ["anchor-64k", "full attention", "ünïcode", "run.v2", "a+b"])
def test_plain_names_are_kept(name):
    assert check_run_name(name) == name and results_dir(name) == Path("results") / name


def test_check_out(tmp_path):
    for bad in ("", "   ", "a\rb", "x\x1b[31m"):
        with pytest.raises(UserError):
            check_out(bad)
    (tmp_path / "f").write_text("x")
    with pytest.raises(UserError, match="is a file"):
        check_out(tmp_path / "f")
    assert check_out(tmp_path / "new") == tmp_path / "new"


def test_check_apart(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (tmp_path / "link").symlink_to(model)
    for out, what in (
        (model, "is the"),
        (model / "run", "inside"),
        (tmp_path, "contains"),
        (tmp_path / "link" / "r", "inside"),
    ):
        with pytest.raises(UserError, match=what):
            check_apart(out, model, "--out", "--model")
    check_apart(tmp_path / "runs" / "x", model, "--out", "--model")  # beside it: fine
    check_apart(tmp_path / "runs" / "x", "meta-llama/Llama-2-7b-hf", "--out", "--model")  # a hub name


def test_a_multi_line_error_is_printed_as_one_line(monkeypatch, capsys):
    from harness.commands import report

    def boom(args):
        raise UserError("first\nsecond\r\nthird")

    monkeypatch.setattr(report, "run", boom)
    assert main(["report", "x"]) == 2
    assert capsys.readouterr().err == "error: first second third\n"


def _harness(*args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.Popen([sys.executable, "-m", "harness", *args], env=env, **kw)


def test_a_closed_pipe_ends_quietly(tmp_path):
    """`harness report ... | head -1`: no BrokenPipeError traceback, no 'Exception ignored' at exit."""
    import json

    from tests.validation.test_results_properties import VALID

    path = tmp_path / "results.json"
    path.write_text(json.dumps(VALID))
    proc = _harness("report", *[str(path)] * 300, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(100)
    proc.stdout.close()  # the reader goes away while report still writes (300 tables > a pipe's buffer)
    err = proc.stderr.read().decode()
    assert proc.wait(60) == 141, err
    assert "Traceback" not in err and "Exception ignored" not in err and "BrokenPipe" not in err


def test_progress_bars_stay_off_a_pipe():
    from harness.core.progress import progress_bar

    bar = progress_bar(total=3, desc="x", unit="u")  # pytest's captured stderr is no terminal
    assert bar.disable
    bar.close()


@pytest.mark.parametrize(
    "exc", [MemoryError(), RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 9e12 bytes")]
)
def test_running_out_of_memory_is_one_line(monkeypatch, capsys, exc):
    from harness.commands import report

    def big(args):
        raise exc

    monkeypatch.setattr(report, "run", big)
    assert main(["report", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: report ran out of memory")


def test_other_runtime_errors_keep_their_traceback(monkeypatch):
    from harness.commands import report

    def bug(args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(report, "run", bug)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["report", "x"])
