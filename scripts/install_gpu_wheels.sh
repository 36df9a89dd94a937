#!/usr/bin/env bash
# Install the wheels listed in scripts/gpu_wheels.txt from .gpu_wheels/ (offline, --no-deps): flashinfer and its
# tvm-ffi runtime always, a small pure-python dependency only where the image lacks it. No .gpu_wheels/: a no-op.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DIR=.gpu_wheels
if [ ! -d "$DIR" ]; then
  echo "install_gpu_wheels: no $DIR/ here; skipping (the flashinfer attention backend will fall back to triton)"
  exit 0
fi
wheels=()
while read -r wheel condition; do
  case "$wheel" in "" | \#*) continue ;; esac
  if [ ! -f "$DIR/$wheel" ]; then
    echo "install_gpu_wheels: $DIR/$wheel is missing; skipped" >&2
    continue
  fi
  module=${condition#only-if-missing=}
  if [ -n "$condition" ] && "$PY" -c "import $module" 2>/dev/null; then
    continue
  fi
  wheels+=("$DIR/$wheel")
done <scripts/gpu_wheels.txt
[ "${#wheels[@]}" -eq 0 ] && exit 0
"$PY" -m pip install -q --no-deps --no-index --disable-pip-version-check --root-user-action=ignore "${wheels[@]}" ||
  exit $?
echo "install_gpu_wheels: installed ${wheels[*]##*/}"
