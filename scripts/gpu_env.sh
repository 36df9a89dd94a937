# Source from the repo root on a GPU machine: makes this checkout importable as `specbench` without pip (whose
# editable mode differs across setuptools versions). kernels/ and workloads/ are linked under specbench/, as
# pyproject's package-dir maps them, so the checkout itself is the complete package: pytest puts the repo root
# first on sys.path (tests import as `tests.support.*`), and that must not find a specbench without them.
for _sb_dir in kernels workloads; do
  [ -e "specbench/$_sb_dir" ] || ln -s "../$_sb_dir" "specbench/$_sb_dir"
done
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export SPECBENCH_DATA_DIR=${SPECBENCH_DATA_DIR:-$PWD/.gpu_data}
[ -d .gpu_wheels ] && bash scripts/install_gpu_wheels.sh >/dev/null 2>&1
true
