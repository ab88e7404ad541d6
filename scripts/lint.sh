#!/usr/bin/env bash
# Lint the tree as CI does: ruff formatting, ruff rules, mypy ([tool.mypy] in pyproject.toml).
# Each step failing makes the script exit non-zero (set -e).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff format --check .
.venv/bin/ruff check .
.venv/bin/python -m mypy
echo "lint: ok"
