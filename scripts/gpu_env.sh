# Source from the repo root on a GPU machine: makes this checkout importable as `specbench` (kernels/ and
# workloads/ mapped under it, as pyproject's package-dir does) without pip, whose editable mode differs
# across setuptools versions. PYTHONSAFEPATH keeps the checkout's bare specbench/ from shadowing the mapping.
_sb_root=$(mktemp -d /tmp/specbench_path.XXXX)
cp -rs "$PWD/specbench" "$_sb_root/specbench"
ln -s "$PWD/kernels" "$_sb_root/specbench/kernels"
ln -s "$PWD/workloads" "$_sb_root/specbench/workloads"
export PYTHONPATH="$_sb_root${PYTHONPATH:+:$PYTHONPATH}" PYTHONSAFEPATH=1
export SPECBENCH_DATA_DIR=${SPECBENCH_DATA_DIR:-$PWD/.gpu_data}
[ -d .gpu_wheels ] && bash scripts/install_gpu_wheels.sh >/dev/null 2>&1
true
