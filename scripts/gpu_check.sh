#!/usr/bin/env bash
# Correctness suite on a CUDA machine (run there from the repo root): fp32 identity, bf16 match rates.
# Needs the data dir (SPECBENCH_DATA_DIR) and the GPU image's preinstalled torch/transformers; no network.
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
status=0
for dtype in fp32 bf16; do
  echo "=== engine suite on cuda, $dtype"
  SPECBENCH_TEST_DTYPE=$dtype "$PY" -m pytest -q -p no:cacheprovider tests/engine "$@" 2>&1 | tee "$OUT/pytest_$dtype.log" | tail -15
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
done
echo "=== GPU-marked tests"
"$PY" -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tee "$OUT/pytest_gpu.log" | tail -15
echo "=== bf16 greedy match rates (vs plain / vs HF)"
cat "$SPECBENCH_TEST_REPORT" 2>/dev/null
exit $status
