"""The CLI shell: help without heavy extras, one-line errors with exit code 2."""

import subprocess
import sys

import pytest

from harness.cli import main


def test_help_lists_commands_and_imports_nothing_heavy():
    code = (
        "import sys, contextlib, io\n"
        "from harness.cli import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        "    try: main(['--help'])\n"
        "    except SystemExit as e: assert e.code == 0\n"
        "heavy = [m for m in ('torch', 'transformers', 'vllm', 'datasets', 'lm_eval') if m in sys.modules]\n"
        "print(buf.getvalue()); print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "generate" in out
    assert "HEAVY []" in out


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2


def test_unknown_flag_exits_2():
    with pytest.raises(SystemExit) as exc:
        main(["--no-such-flag"])
    assert exc.value.code == 2
