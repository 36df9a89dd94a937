#!/usr/bin/env bash
# Issue 47 in one device call (at most 100 s + 360 s on an H100): the CUDA tests of the "grouped" MoE kernel set, then
# scripts/bench_moe_before_after.py (the "gemv" and "grouped" sets side by side on one engine per target). Writes at
# most 4 files to $OUT: pytest_cuda.txt, bench.json, bench.md, bench.log. Extra arguments go to the bench (e.g.
# --targets qwen3-30b-a3b for one target); the table is rewritten after each target, so a time-out keeps the first.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/specbench_gpu}
mkdir -p "$OUT"
source scripts/gpu_env.sh
timeout "${TEST_TIMEOUT:-100}" "$PY" -m pytest -q -p no:cacheprovider \
  tests/kernels/test_kernel_moe_grouped_set.py tests/models/test_moe_grouped_engine.py \
  tests/perf/test_moe_set_timing.py \
  > "$OUT/pytest_cuda.txt" 2>&1
echo "=== pytest cuda exit $?" >> "$OUT/pytest_cuda.txt"
timeout "${BENCH_TIMEOUT:-360}" "$PY" scripts/bench_moe_before_after.py --out "$OUT" "$@" > "$OUT/bench.log" 2>&1
echo "=== bench exit $?" >> "$OUT/bench.log"
tail -2 "$OUT/pytest_cuda.txt"
cat "$OUT/bench.md" 2>/dev/null || tail -30 "$OUT/bench.log"
