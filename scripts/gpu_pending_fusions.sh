#!/usr/bin/env bash
# The fusions pending a GPU run (models/pending_fusions.py: the MoE routing kernel's norm prologue, Qwen3-Next's gated
# attention as four kernels) validated and timed in one device call (~9 min on an H100), run there from the repo root:
#   (A) with SPECBENCH_PENDING_FUSIONS=on: the CUDA tests of their kernels and engines (fp32, invariants on) beside a
#       focused CUDA selftest (their mutants and the hybrid / MoE paths they sit on);
#   (B) on a quiet GPU, the same tree off then on, back to back: the hybrid rows (plain c=1/16, MTP) and the MoE rows
#       (Qwen3-30B-A3B, gpt-oss-20b cut to 12 layers, c=1 and 16);
# then (C) the dense rows with PDL off and on if time is left (issue 47's "dense rows unchanged").
# Writes to $OUT as each part finishes: summary.txt (every table), pytest_cuda.txt, selftest_focused.txt, *.json.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/specbench_gpu}
mkdir -p "$OUT"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
source scripts/gpu_env.sh
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$S"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$S"
export SPECBENCH_PENDING_FUSIONS=on
timeout 160 python -m specbench selftest --device cuda --jobs 10 --seeds 0 --methods draft,mtp,ngram \
  --faults gated-attention-kv-slot-shift,gated-attention-gate-shift,moe-route-norm-half-written,state-fused-kept-shifted,moe-padding-mask-frozen-at-capture \
  --no-trees --no-chunked --no-constrained > "$OUT/selftest_focused.txt" 2>&1 &
selftest=$!
SPECBENCH_DEBUG_INVARIANTS=1 SPECBENCH_TEST_DEVICE=cuda SPECBENCH_TEST_DTYPE=fp32 timeout 150 python -m pytest -q \
  -p no:cacheprovider tests/kernels/test_kernel_moe_router_norm.py tests/kernels/test_moe_route_norm_layer.py \
  tests/kernels/test_kernel_gated_attention.py tests/models/test_gated_attention_fused.py \
  tests/kernels/test_kernel_qk_norm_rope.py tests/kernels/test_kernel_moe_router.py tests/models/test_moe_fused_engine.py \
  tests/models/test_hybrid_graphs_cuda.py > "$OUT/pytest_cuda.txt" 2>&1
echo "=== pytest exit $? at $(el)s: $(tail -1 "$OUT/pytest_cuda.txt")" >> "$S"
wait $selftest; echo "=== focused selftest exit $? at $(el)s" >> "$S"
grep -E "coverage|false alarms|passed|FAILED|missed|detected" "$OUT/selftest_focused.txt" | tail -16 >> "$S"
hybrid() {  # $1 = off | on
  SPECBENCH_PENDING_FUSIONS=$1 timeout 100 python scripts/bench_hybrid.py --layers 12 --methods mtp --no-eager-rows \
    --out "/tmp/hybrid_$1" > "/tmp/hybrid_$1.log" 2>&1
  echo "=== hybrid fusions $1 rc=$? at $(el)s" >> "$S"
  cat "/tmp/hybrid_$1/bench.md" >> "$S" 2>/dev/null || tail -8 "/tmp/hybrid_$1.log" >> "$S"
  cp "/tmp/hybrid_$1/bench.json" "$OUT/hybrid_$1.json" 2>/dev/null
}
moe() {
  SPECBENCH_PENDING_FUSIONS=$1 timeout 120 python scripts/bench_gpu.py --suite moe --moe-targets qwen3-30b-a3b,gpt-oss-20b \
    --moe-layers 12 --skip-hf --concurrency 1,16 --out "/tmp/moe_$1" > "/tmp/moe_$1.log" 2>&1
  echo "=== moe fusions $1 rc=$? at $(el)s" >> "$S"
  cat "/tmp/moe_$1/bench.md" >> "$S" 2>/dev/null || tail -8 "/tmp/moe_$1.log" >> "$S"
  cp "/tmp/moe_$1/bench.json" "$OUT/moe_$1.json" 2>/dev/null
}
hybrid off; hybrid on
moe off; moe on
for pdl in off on; do
  budget=$(( 570 - $(el) )); [ $budget -lt 40 ] && break
  SPECBENCH_PENDING_FUSIONS=off SPECBENCH_PDL=$pdl timeout $(( budget / 2 )) python scripts/bench_gpu.py --suite dense \
    --skip-hf --skip-hf-static --skip-flashinfer --concurrency 1,16 --out "/tmp/dense_$pdl" > "/tmp/dense_$pdl.log" 2>&1
  echo "=== dense pdl=$pdl rc=$? at $(el)s" >> "$S"
  cat "/tmp/dense_$pdl/bench.md" >> "$S" 2>/dev/null || tail -5 "/tmp/dense_$pdl.log" >> "$S"
done
cat "$S"
