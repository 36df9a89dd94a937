#!/usr/bin/env bash
# Install specbench (editable) and what it needs into the repo's virtual environment `.venv` (created with
# $PYTHON, default python3, when absent; reused when present). Usage: scripts/setup.sh [EXTRA[,EXTRA]]
# The other scripts run everything through .venv/bin/python, so CI runs what a new user gets.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv
if [ ! -x "$VENV/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$VENV"
fi
PY=$VENV/bin/python
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
