"""Render bench_gpu.py's JSON as the BENCHMARKS.md tables (specbench/perf/gpu_table.py).

    python scripts/bench_gpu_table.py results/bench_gpu/bench.json
"""

from __future__ import annotations

import json
import sys

from specbench.perf.gpu_table import render

if __name__ == "__main__":
    print(render(json.loads(open(sys.argv[1]).read())))
