#!/usr/bin/env bash
# The short form of scripts/gpu_sched_check.sh for a device call with little time left (about 5 minutes): the ab
# check under 8 CPU burners beside the CUDA tests of the new scheduler paths, then --suite prefix on a quiet GPU, then
# the stress matrix on the tiny pair on cuda. Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/specbench_gpu}
WORK=$(mktemp -d)
mkdir -p "$OUT"
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/summary.txt"
SPECBENCH_TEST_DEVICE=cuda SPECBENCH_TEST_DTYPE=fp32 SPECBENCH_DEBUG_INVARIANTS=1 timeout 110 "$PY" -m pytest -q -x \
  -p no:cacheprovider tests/engine/test_prefix_caching.py tests/engine/test_chunked_prefill.py \
  tests/faults/test_path_mutants_cuda.py > "$OUT/pytest_cuda.txt" 2>&1 &
tests=$!
OUT=$WORK timeout 200 bash scripts/gpu_ab_check.sh --load 8 > "$OUT/ab.txt" 2>&1
echo "=== ab exit $? (0: slow-step regressed, A/A within noise)" >> "$OUT/summary.txt"
pkill -f "while True: pass" 2>/dev/null
wait $tests; echo "=== pytest cuda exit $?" >> "$OUT/summary.txt"; tail -3 "$OUT/pytest_cuda.txt" >> "$OUT/summary.txt"
timeout "${BENCH_TIMEOUT:-90}" "$PY" scripts/bench_gpu.py --suite prefix --concurrency 16 --out "$WORK/bp" \
  > "$OUT/bench_prefix.log" 2>&1
echo "=== bench prefix exit $?" >> "$OUT/summary.txt"
cp "$WORK/bp/bench.json" "$OUT/bench_prefix.json" 2>/dev/null
grep -E "REGRESSED|within noise|regressed|exit" "$OUT/ab.txt" | head -12 >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
