#!/usr/bin/env bash
# The fixes of an earlier GPU call, checked again in one short device call (about 7 minutes): the ab check under 8 CPU
# burners, --suite chunked, and the stress matrix on cuda with chunking off and on. Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/specbench_gpu}
WORK=$(mktemp -d)
mkdir -p "$OUT"
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/summary.txt"
OUT=$WORK timeout 200 bash scripts/gpu_ab_check.sh --load 8 > "$OUT/ab.txt" 2>&1
echo "=== ab exit $? (0: slow-step regressed, A/A within noise)" >> "$OUT/summary.txt"
pkill -f "while True: pass" 2>/dev/null
grep -E "REGRESSED|within noise|improved|exit" "$OUT/ab.txt" | head -12 >> "$OUT/summary.txt"
timeout "${BENCH_TIMEOUT:-150}" "$PY" scripts/bench_gpu.py --suite chunked --concurrency 16 --out "$WORK/bc" \
  > "$WORK/bc.log" 2>&1
echo "=== bench chunked exit $?" >> "$OUT/summary.txt"
cp "$WORK/bc/bench.md" "$OUT/bench_chunked.md" 2>/dev/null || tail -20 "$WORK/bc.log" >> "$OUT/summary.txt"
PAIR=$WORK/pair
"$PY" - "$PAIR" <<'PY'
import sys
from specbench.selftest.tiny import build_tiny_pair
from tests.support.tiny_models import VOCAB_SIZE, load_tiny_tokenizer
for path in build_tiny_pair(sys.argv[1], seed=0, vocab_size=VOCAB_SIZE):
    load_tiny_tokenizer().save_pretrained(path)
PY
stress=(--target "$PAIR/target" --draft "$PAIR/draft" -k 3 --device cuda --dtype fp32 --window-tokens 512)
{ timeout 100 "$PY" -m specbench stress "${stress[@]}"; echo "exit $?"
  timeout 100 "$PY" -m specbench stress "${stress[@]}" --enable-chunked-prefill --max-num-batched-tokens 64
  echo "exit $?"; } > "$OUT/stress_cuda.txt" 2>&1
grep -E "^## specbench stress|^exit|^error|crashed" "$OUT/stress_cuda.txt" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
