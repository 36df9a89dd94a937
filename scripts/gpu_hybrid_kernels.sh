#!/usr/bin/env bash
# Issue 45's triton recurrent kernels on a GPU in one device call: their tests on CUDA (the layer against the torch
# forms in fp32 and bf16, engines on them against the torch engine with the state oracle, graphs captured), then
# the hybrid bench torch vs triton side by side (same call, same card), then the per-part device time of a graphed
# decode step on each. Logs and bench tables under $OUT.
#   OUT=/tmp/x bash scripts/gpu_hybrid_kernels.sh [LAYERS (default 12)]
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/specbench_gpu}
LAYERS=${1:-12}
mkdir -p "$OUT"
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SPECBENCH_DEBUG_INVARIANTS=1 SPECBENCH_TEST_DEVICE=cuda SPECBENCH_TEST_DTYPE=fp32 timeout "${TEST_TIMEOUT:-150}" \
  "$PY" -m pytest -q -p no:cacheprovider tests/kernels/test_kernel_gated_delta_verify.py \
  tests/recurrent/test_triton_verify_engine.py tests/models/test_hybrid_graphs_cuda.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; tail -4 "$OUT/tests.log"
for kernels in torch triton; do
  timeout "${BENCH_TIMEOUT:-150}" "$PY" scripts/bench_hybrid.py --layers "$LAYERS" --methods mtp,eagle3 \
    --no-eager-rows --recurrent-kernels "$kernels" --out "$OUT/bench_$kernels" > "$OUT/bench_$kernels.log" 2>&1
  echo "bench $kernels rc=$?"; grep -E "^\| (mtp|eagle3)|^verify" "$OUT/bench_$kernels/bench.md"
done
for kernels in torch triton; do
  timeout "${PROFILE_TIMEOUT:-120}" "$PY" scripts/profile_step.py --preset qwen3-next-80b-a3b --layers "$LAYERS" \
    --recurrent-kernels "$kernels" --steps 20 --top 15 > "$OUT/profile_$kernels.log" 2>&1
  echo "profile $kernels rc=$?"; grep -v "^USDT\|^\[W" "$OUT/profile_$kernels.log" | tail -24
done
