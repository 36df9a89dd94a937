#!/usr/bin/env bash
# Issue 43/44/40 on a CUDA machine, one device call (run there from the repo root; logs and tables in $OUT):
#   1. `specbench ab` under 8 CPU burners (scripts/gpu_ab_check.sh: slow-step REGRESSED, A/A not called);
#   2. the benchmarks on a quiet GPU: --suite prefix (shared-prefix multi-turn, caching off vs on) and --suite chunked
#      (long prompts arriving while 16 requests decode, chunking off vs on), Llama-3.1-8B shapes, dummy weights;
#   3. side by side: the prefix-cache, chunked-prefill and CUDA path-mutant tests on cuda (fp32), and the stress
#      matrix on the tiny pair on cuda (fp32: the output rule), chunking off and on.
#   bash scripts/gpu_sched_check.sh        (BENCH_TIMEOUT, seconds per suite, default 130)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/specbench_gpu}
WORK=$(mktemp -d)
mkdir -p "$OUT"
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/summary.txt"
OUT=$WORK timeout 200 bash scripts/gpu_ab_check.sh --load 8 >> "$OUT/summary.txt" 2>&1
echo "=== ab exit $? (0: slow-step regressed, A/A within noise)" >> "$OUT/summary.txt"
pkill -f "while True: pass" 2>/dev/null  # burners a timed-out ab check left behind
for suite in prefix chunked; do
  timeout "${BENCH_TIMEOUT:-130}" "$PY" scripts/bench_gpu.py --suite "$suite" --concurrency 16 \
    --out "$WORK/bench_$suite" > "$WORK/bench_$suite.log" 2>&1
  echo "=== bench $suite exit $?" >> "$OUT/summary.txt"
  cp "$WORK/bench_$suite/bench.md" "$OUT/bench_$suite.md" 2>/dev/null
  cp "$WORK/bench_$suite/bench.json" "$OUT/bench_$suite.json" 2>/dev/null || tail -20 "$WORK/bench_$suite.log" >> "$OUT/summary.txt"
done
PAIR=$WORK/pair
"$PY" - "$PAIR" <<'PY'
import sys
from specbench.selftest.tiny import build_tiny_pair
from tests.support.tiny_models import VOCAB_SIZE, load_tiny_tokenizer
for path in build_tiny_pair(sys.argv[1], seed=0, vocab_size=VOCAB_SIZE):
    load_tiny_tokenizer().save_pretrained(path)
PY
SPECBENCH_TEST_DEVICE=cuda SPECBENCH_TEST_DTYPE=fp32 SPECBENCH_DEBUG_INVARIANTS=1 timeout 190 "$PY" -m pytest -q \
  -p no:cacheprovider tests/engine/test_prefix_caching.py tests/engine/test_chunked_prefill.py tests/kv \
  tests/faults/test_path_mutants_cuda.py tests/faults/test_prefix_mutants.py tests/faults/test_chunk_mutants.py \
  > "$OUT/pytest_cuda.txt" 2>&1 &
tests=$!
stress=(--target "$PAIR/target" --draft "$PAIR/draft" -k 3 --device cuda --dtype fp32 --window-tokens 512)
{ timeout 90 "$PY" -m specbench stress "${stress[@]}"; echo "exit $?"
  timeout 90 "$PY" -m specbench stress "${stress[@]}" --enable-chunked-prefill --max-num-batched-tokens 64
  echo "exit $?"; } > "$OUT/stress_cuda.txt" 2>&1
wait $tests; echo "=== pytest cuda exit $?" >> "$OUT/summary.txt"
tail -3 "$OUT/pytest_cuda.txt" >> "$OUT/summary.txt"
grep -E "^## specbench stress|^exit|about .* min" "$OUT/stress_cuda.txt" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
