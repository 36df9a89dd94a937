"""Llama-3.1-8B decode projections at batch 1/16/64: torch's F.linear (cuBLAS) against the copy bandwidth.
The fused Triton GEMVs and their tiles are timed by scripts/bench_decode_layer.py --sweep.

    python scripts/bench_projections.py [--layers 32]

Each timing is a CUDA graph of one projection per layer on `--layers` distinct weights (what a step reads:
nothing stays in L2), replayed; median of triton.testing.do_bench. Prints one markdown table.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from specbench.perf.gpu_perf import copy_bandwidth_gbps
from specbench.perf.graph_timing import graphed_ms

SHAPES = {"qkv": (6144, 4096), "o_proj": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=32)
    args = ap.parse_args()
    bw = copy_bandwidth_gbps()
    print(f"device {torch.cuda.get_device_name()}, copy bandwidth {bw:.0f} GB/s, torch {torch.__version__}, "
          f"CUDA {torch.version.cuda}")
    rows = []
    for name, (n, k) in SHAPES.items():
        weights = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(args.layers)]
        nbytes = n * k * 2
        for m in (1, 16, 64):
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            ms = graphed_ms(lambda i: F.linear(x, weights[i]), args.layers)
            gbps = nbytes / ms / 1e6
            rows.append(f"| {name} {n}x{k} | {m} | {ms * 1e3:.1f} | {gbps:.0f} | {100 * gbps / bw:.0f}% |")
        del weights
        torch.cuda.empty_cache()
    print("| projection | batch | torch us | torch GB/s | % of copy |")
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
