#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs redis-server if missing (Debian; needs root),
# creates .venv, installs dedupd with its dev extra, runs the code gates (ruff check, ruff format --check,
# mypy --strict, the import layers) and then pytest, in parallel (pytest-xdist). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing redis-server (apt-get)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq redis-server >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq redis-server >/dev/null; }
  else
    echo "redis-server is needed for the tests: install it (Debian/Ubuntu: sudo apt-get install redis-server)" >&2
    exit 2
  fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e '.[dev]' 2>&1 | grep -v -E '^(WARNING: Location|  )' || true
.venv/bin/python -c 'import dedupd, redis, numpy, fakeredis, hypothesis, xdist' || { echo "install failed" >&2; exit 2; }
for tool in ruff mypy; do
  [ -x ".venv/bin/$tool" ] || { echo "install failed: no .venv/bin/$tool" >&2; exit 2; }
done

# code gates (configured in pyproject.toml): lint, formatting, static types, import layers; each one stops the run
.venv/bin/ruff check dedupd tests scripts || { echo "gate failed: ruff check (lint)" >&2; exit 1; }
.venv/bin/ruff format --check dedupd tests scripts || { echo "gate failed: ruff format --check (formatting)" >&2; exit 1; }
.venv/bin/mypy --strict dedupd || { echo "gate failed: mypy --strict dedupd (types)" >&2; exit 1; }
.venv/bin/python scripts/check_layers.py || { echo "gate failed: scripts/check_layers.py (import layers)" >&2; exit 1; }

# the tests run in parallel, one worker per core (at most 4; DEDUPD_TEST_WORKERS=0 runs them in this process)
exec .venv/bin/python -m pytest -n "${DEDUPD_TEST_WORKERS:-auto}" --maxprocesses 4 "$@"
