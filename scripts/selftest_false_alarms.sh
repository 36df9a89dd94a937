#!/usr/bin/env bash
# False alarms of the clean engine on a CUDA machine (run there from the repo root): per seed (default 0-29) the plain
# row and every method's clean row under the full battery, rows in parallel worker processes (--jobs auto). Prints the
# mutation and coverage tables, then "false alarms: N of M clean rows"; exit 1 on any false alarm. Seeds past the
# shipped reference baselines (0-31) skip the baseline check, saying so. Extra arguments go to `specbench selftest`.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
source scripts/gpu_env.sh
"$PY" -m specbench selftest --device cuda --seeds "${SEEDS:-0-29}" --faults none --jobs auto "$@"
