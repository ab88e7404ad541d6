"""Pick a runner by backend name; each backend's heavy imports happen only when it is chosen.

runner = get_runner("hf", "runs/anchor/ckpt-2000", RunnerSettings(backend="hf"))
"""

from __future__ import annotations

from harness.errors import MissingExtra, UserError
from harness.runners.base import Runner, RunnerSettings

BACKENDS = ("hf", "vllm")


def vllm_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def get_runner(backend: str, model_path: str, settings: RunnerSettings) -> Runner:
    if backend == "hf":
        from harness.runners.hf import HFRunner

        return HFRunner(model_path, settings)
    if backend == "vllm":
        if not vllm_available():
            raise MissingExtra(
                "--backend vllm",
                "pip install vllm (GPU), or bash scripts/setup_vllm_env.sh for vLLM on CPU in .venv-vllm",
            )
        from harness.runners.vllm import VLLMRunner

        return VLLMRunner(model_path, settings)
    raise UserError(f"unknown backend {backend!r}: choose {' or '.join(BACKENDS)}")
