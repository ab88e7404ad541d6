"""Helpers shared by the model-source tests."""

from __future__ import annotations


def run_cli(*argv: str) -> tuple[int, str, str]:
    """`harness ARGV` in this process: (exit code, stdout, stderr)."""
    import contextlib
    import io

    from harness.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()
