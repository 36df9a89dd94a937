#!/usr/bin/env bash
# Test suite on a fresh machine: install with test extras, then pytest (CPU; GPU tests skip cleanly).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
bash scripts/setup.sh test
export SPECBENCH_DATA_DIR=${SPECBENCH_DATA_DIR:-$(cd .. && pwd)/shared/data}
export SPECBENCH_DEBUG_INVARIANTS=1
exec "$PY" -m pytest -q -p no:cacheprovider --timeout 900 "$@"
