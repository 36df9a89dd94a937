#!/usr/bin/env bash
# On a CUDA machine, from the repo root: `specbench ab` finds an injected slowdown (--b-inject slow-step: each step
# waits 25% of its own time, about -20% throughput) and calls an A/A run within noise, with other processes loading
# the host's cores (`--load N`: N CPU burners; the verdict must survive them). The selftest's tiny pair with the
# tests' tiny tokenizer, built here.
#   bash scripts/gpu_ab_check.sh [--load N]        logs in $OUT (default /tmp/specbench_gpu)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/specbench_gpu}
LOAD=0
[ "${1:-}" = "--load" ] && LOAD=${2:-0}
mkdir -p "$OUT"
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
PAIR=$(mktemp -d)
"$PY" - "$PAIR" <<'PY'
import sys
from specbench.selftest.tiny import build_tiny_pair
from tests.support.tiny_models import VOCAB_SIZE, load_tiny_tokenizer
for path in build_tiny_pair(sys.argv[1], seed=0, vocab_size=VOCAB_SIZE):
    load_tiny_tokenizer().save_pretrained(path)
PY
burners=()
for _ in $(seq 1 "$LOAD"); do "$PY" -c 'while True: pass' & burners+=($!); done
common=(--target "$PAIR/target" --draft "$PAIR/draft" -k 3 -n 8 --repeats 6 --max-tokens 64 --shots 1 --device cuda)
"$PY" -m specbench ab "${common[@]}" --b-inject slow-step --fail-on-regressed > "$OUT/ab_slow_step.txt" 2>&1
slow=$?
"$PY" -m specbench ab "${common[@]}" --fail-on-regressed > "$OUT/ab_a_a.txt" 2>&1
same=$?
for pid in "${burners[@]}"; do kill "$pid"; done
echo "=== slow-step (load $LOAD burners): exit $slow (1 = regressed, as it must)"; tail -25 "$OUT/ab_slow_step.txt"
echo "=== A/A (load $LOAD burners): exit $same (0 = no regression called, as it must)"; tail -25 "$OUT/ab_a_a.txt"
[ "$slow" = 1 ] && [ "$same" = 0 ]
