#!/usr/bin/env bash
# Install specbench (editable) and what it needs. Usage: scripts/setup.sh [EXTRA[,EXTRA]]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c "import torch" 2>/dev/null; then
  # Pinned: this wheel is the CPU build; an unpinned torch would pull a multi-GB CUDA build.
  "$PY" -m pip install -q "torch==2.13.0"
fi
extras=${1:-}
if [ -n "$extras" ]; then
  "$PY" -m pip install -q -e ".[$extras]"
else
  "$PY" -m pip install -q -e .
fi
