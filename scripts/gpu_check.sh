#!/usr/bin/env bash
# Correctness suite on a CUDA machine (run there from the repo root): fp32 identity, bf16 match rates, the GPU-marked
# tests. Needs the data dir (SPECBENCH_DATA_DIR) and the GPU image's preinstalled torch/transformers; no network.
# The four parts run side by side (tiny models: none fills the GPU; the host has the cores), so the whole check fits
# one device call (PART_TIMEOUT, seconds, caps each part); each part's log is in $OUT, the tail of each is printed
# when all are done.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/specbench_gpu}
mkdir -p "$OUT"
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$PY" -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"
export SPECBENCH_DEBUG_INVARIANTS=1 SPECBENCH_TEST_DEVICE=cuda SPECBENCH_TEST_REPORT="$OUT/gpu_report.jsonl"
rm -f "$SPECBENCH_TEST_REPORT"
declare -A parts=(
  [engine_fp32]="env SPECBENCH_TEST_DTYPE=fp32 $PY -m pytest -q -p no:cacheprovider tests/engine $*"
  [engine_bf16]="env SPECBENCH_TEST_DTYPE=bf16 $PY -m pytest -q -p no:cacheprovider tests/engine $*"
  [gpu_kernels]="$PY -m pytest -q -p no:cacheprovider -m gpu tests/kernels"
  [gpu_rest]="$PY -m pytest -q -p no:cacheprovider -m gpu tests --ignore=tests/kernels"
)
declare -A pids=()
for name in "${!parts[@]}"; do
  timeout "${PART_TIMEOUT:-3600}" ${parts[$name]} > "$OUT/pytest_$name.log" 2>&1 &
  pids[$name]=$!
done
status=0
for name in engine_fp32 engine_bf16 gpu_kernels gpu_rest; do
  wait "${pids[$name]}" || status=1
  echo "=== $name (${parts[$name]})"
  tail -15 "$OUT/pytest_$name.log"
done
echo "=== bf16 greedy match rates (vs plain / vs HF)"
cat "$SPECBENCH_TEST_REPORT" 2>/dev/null
exit $status
