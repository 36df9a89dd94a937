#!/usr/bin/env bash
# Build llama.cpp's `llama-server` (only that target) from the llama.cpp sources vendored in the
# llama-cpp-python sdist on PyPI, into a cache outside the repo. Pinned and checked by sha256.
# Usage: scripts/build_llama_server.sh [CACHE_DIR]   (default $SPECBENCH_LLAMA_CACHE or ~/.cache/specbench/llama)
# Prints the binary's path last. Reuses a finished build.
set -euo pipefail
VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
CACHE=${1:-${SPECBENCH_LLAMA_CACHE:-$HOME/.cache/specbench/llama}}
BIN="$CACHE/build/bin/llama-server"
if [ -x "$BIN" ]; then
  [ -f "$CACHE/build_seconds" ] && echo "reusing llama-server built in $(cat "$CACHE/build_seconds") s" >&2
  echo "$BIN"; exit 0
fi
mkdir -p "$CACHE"
cd "$CACHE"
SDIST="llama_cpp_python-$VERSION.tar.gz"
if [ ! -f "$SDIST" ]; then
  python3 -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d .
fi
echo "$SHA256  $SDIST" | sha256sum -c --quiet
if [ ! -d src ]; then
  rm -rf src.tmp && mkdir src.tmp
  tar xzf "$SDIST" -C src.tmp --strip-components=3 "llama_cpp_python-$VERSION/vendor/llama.cpp"
  mv src.tmp src
fi
# x86-64-v3 (AVX2, FMA, F16C), not -march=native: a native build on a CPU reporting AMX compiles ggml's AMX matmul,
# which segfaulted at the first forward on this project's machines (gdb: ggml_backend_amx_mul_mat; AMX tiles need a
# kernel permission a container may not grant), in llama.cpp 0.3.36's vendored copy and in a 2026-10 one alike.
ISA=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON)
start=$(date +%s)
cmake -S src -B build -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF "${ISA[@]}" >/dev/null
cmake --build build --target llama-server -j "${JOBS:-$(nproc)}" >build.log 2>&1 || { tail -30 build.log; exit 1; }
seconds=$(( $(date +%s) - start ))
echo "$seconds" > "$CACHE/build_seconds"
echo "built llama-server in $seconds s (configure + build, ${JOBS:-$(nproc)} jobs)" >&2
echo "$BIN"
