# Source from the repo root on a GPU machine: makes this checkout importable as `specbench` without pip (whose
# editable mode differs across setuptools versions): every product folder lives under specbench/, so the checkout
# is the complete package.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export SPECBENCH_DATA_DIR=${SPECBENCH_DATA_DIR:-$PWD/.gpu_data}
[ -d .gpu_wheels ] && bash scripts/install_gpu_wheels.sh >/dev/null 2>&1
true
