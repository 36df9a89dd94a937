#!/usr/bin/env bash
# Before/after in one device call: scripts/bench_gpu.py from other trees and this one, interleaved.
# Make the other trees here first (git archive; carried to the GPU under the ignored .gpu_data/):
#   git archive --format=tar.gz -o .gpu_data/before_<rev>.tar.gz <rev> specbench scripts workloads kernels pyproject.toml
# then on the GPU machine: bash scripts/bench_before_after.sh CONCURRENCY ROUNDS [VERSIONS]  (trees:
# .gpu_data/{before,mid}*.tar.gz; VERSIONS defaults to "before mid after", after = this tree)
R=$PWD; CONC=${1:-1,16,64}; ROUNDS=${2:-2}; VERSIONS=${3:-before mid after}
for v in ${VERSIONS/after/}; do mkdir -p /tmp/$v; tar xzf .gpu_data/${v}*.tar.gz -C /tmp/$v; cp -r .gpu_wheels /tmp/$v/; done
for i in $(seq 1 $ROUNDS); do
  for v in $VERSIONS; do
    if [ $v = after ]; then d=$R; else d=/tmp/$v; fi
    (cd $d && unset PYTHONPATH && source scripts/gpu_env.sh && timeout 200 python scripts/bench_gpu.py --skip-hf --skip-flashinfer --concurrency $CONC --out $OUT/$v$i > $OUT/$v$i.log 2>&1; echo "$v$i rc=$?")
  done
done
python - <<'PY'
import json, os, glob
out=os.environ['OUT']
rows={}
for f in sorted(glob.glob(f"{out}/*/bench.json")):
    v=f.split('/')[-2]; d=json.load(open(f))['sections']
    for k,x in d.items():
        if isinstance(x,dict) and 'step_ms' in x: rows.setdefault(k,{})[v]=x['step_ms']
for k,vs in rows.items(): print(k, ' '.join(f"{v}={ms:.3f}" for v,ms in sorted(vs.items())))
PY
