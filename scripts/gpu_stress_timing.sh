#!/usr/bin/env bash
# Issue 44's budget: `specbench stress`'s default matrix against a GPU server, timed. Two `specbench serve` launched by
# the stage itself (--server-cmd: speculating, --server-baseline-cmd: k = 0), each a dummy-weight bf16 PRESET (default
# llama-3.1-8b) with n-gram k = 3 on cuda, served with the tests' tiny BPE tokenizer (its ids fit any preset's vocab).
# Dummy weights answer no canary, on either side: the verdict is about equal failure, the point is the wall time of
# the whole matrix (plan with its estimate first, then each condition), launch and restarts included.
#   OUT=/tmp/x bash scripts/gpu_stress_timing.sh [PRESET] [extra stress options]
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/specbench_gpu}
mkdir -p "$OUT"
source scripts/gpu_env.sh
PRESET=${1:-llama-3.1-8b}
shift || true
# the directory on a line of its own: building the tokenizer the first time prints to stdout too
TOK=$("$PY" -c "from tests.support.tiny_models import tiny_tokenizer_dir; print('TOKENIZER_DIR=' + str(tiny_tokenizer_dir()))" \
  | grep -o 'TOKENIZER_DIR=[^[:space:]]*' | tail -n 1 | cut -d= -f2-)
DEVICE=${DEVICE:-cuda}
SERVE="$PY -m specbench serve --target {model} --load-format dummy --tokenizer $TOK --device $DEVICE --dtype bf16 \
--kv-cache-gb 8 --host {host} --port {port}"
start=$(date +%s)
timeout "${STRESS_LIMIT:-3600}" "$PY" -m specbench stress --target "$PRESET" \
  --server-cmd "$SERVE --method ngram --num-steps {num_steps}" --server-baseline-cmd "$SERVE" \
  --tokenizer "$TOK" --method ngram -k 3 --server-ready-timeout 300 --results-dir "$OUT/stress_servers" \
  --report-md "$OUT/stress_report.md" "$@" > "$OUT/stress_timing.txt" 2>&1
status=$?
echo "=== stress against two specbench serve ($PRESET dummy bf16, ngram k=3, $DEVICE): exit $status," \
  "$(( $(date +%s) - start )) s wall" | tee -a "$OUT/stress_timing.txt"
tail -30 "$OUT/stress_timing.txt"
