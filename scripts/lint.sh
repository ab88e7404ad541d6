#!/usr/bin/env bash
# Format, lint and type checks (settings in pyproject.toml), from .venv: `ruff format --check`,
# `ruff check` and `mypy`. All three run, so one pass reports every finding; the exit status is
# non-zero when any of them found something. Fix formatting with `.venv/bin/ruff format .`.
set -uo pipefail
cd "$(dirname "$0")/.."
for tool in ruff mypy; do
  if [ ! -x ".venv/bin/$tool" ]; then
    echo "lint: .venv/bin/$tool is missing: run bash scripts/setup.sh (it installs the dev extra)" >&2
    exit 2
  fi
done
status=0
.venv/bin/ruff format --check . || status=1
.venv/bin/ruff check . || status=1
.venv/bin/mypy || status=1
[ "$status" = 0 ] && echo "lint: ok"
exit "$status"
