"""The runner registry: backends register themselves, listing them imports nothing heavy."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.core.errors import UserError
from harness.models.runners import registry
from harness.models.runners.base import RunnerSettings


def test_listing_backends_and_building_the_cli_import_no_heavy_module():
    code = (
        "import sys\n"
        "from harness.cli import build_parser\n"
        "from harness.models.runners.registry import backend_names\n"
        "build_parser()\n"
        "print(','.join(backend_names()))\n"
        "print(','.join(m for m in ('torch', 'transformers', 'vllm', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    names, heavy = out.splitlines()
    assert names.split(",")[:1] == ["hf"] and {"hf", "vllm", "openai"} <= set(names.split(","))
    assert heavy == ""


def test_cli_choices_come_from_the_registry():
    from harness.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    eval_backend = next(a for a in sub["eval"]._actions if a.dest == "backend")
    demo_backend = next(a for a in sub["demo"]._actions if a.dest == "eval_backend")
    assert tuple(eval_backend.choices) == registry.backend_names()
    # the demo evaluates the checkpoints it trains: only backends that load checkpoint directories
    assert tuple(demo_backend.choices) == registry.backend_names(local_only=True)
    assert "openai" not in demo_backend.choices


def test_a_new_backend_is_one_decorated_class(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    @registry.register_runner("echo", help="repeats the prompt")
    class EchoRunner:
        submit_all = True

        def __init__(self, model_path: str, settings: RunnerSettings):
            self.model_path, self.settings = model_path, settings

    assert "echo" in registry.backend_names()
    runner = registry.get_runner("echo", "m", RunnerSettings(backend="echo"))
    assert isinstance(runner, EchoRunner) and runner.model_path == "m"
    with pytest.raises(ValueError, match="registered twice"):
        registry.register_runner("echo")(type("Other", (), {}))
    with pytest.raises(UserError, match="unknown backend 'nope': choose hf, "):
        registry.get_runner("nope", "m", RunnerSettings(backend="nope"))


def test_missing_requirement_names_the_install_command(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register_runner("ghost", requires="no_such_module_xyz", install="pip install ghost")(type("G", (), {}))
    assert not registry.backend_available("ghost")
    with pytest.raises(UserError, match="`pip install ghost`"):
        registry.get_runner("ghost", "m", RunnerSettings(backend="ghost"))
