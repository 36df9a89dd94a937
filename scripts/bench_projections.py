"""Llama-3.1-8B decode projections at batch 1/16/64: torch's F.linear against the copy bandwidth, and at batch 1
a plain Triton GEMV over a few tile configurations, to see whether torch's choice for the small GEMVs is poor.

    python scripts/bench_projections.py [--layers 32]

Each timing is a CUDA graph of one projection per layer on `--layers` distinct weights (what a step reads:
nothing stays in L2), replayed; median of triton.testing.do_bench. Prints one markdown table.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from specbench.bench.gpu_perf import copy_bandwidth_gbps
from specbench.bench.graph_timing import graphed_ms

SHAPES = {"qkv": (6144, 4096), "o_proj": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
GEMV_CONFIGS = [(bn, bk, w) for bn in (4, 8, 16) for bk in (256, 512) for w in (4, 8)]


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, out_ptr, N, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # out[n] = sum_k w[n, k] * x[k]; one program per BLOCK_N rows, fp32 accumulation.
    n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + k, mask=k < K, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + n[:, None] * K + k[None, :], mask=(n < N)[:, None] & (k < K)[None, :], other=0.0)
        acc += w.to(tl.float32) * x[None, :]
    tl.store(out_ptr + n, tl.sum(acc, axis=1).to(out_ptr.dtype.element_ty), mask=n < N)


def gemv(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, config: tuple[int, int, int]) -> None:
    block_n, block_k, num_warps = config
    n, k = w.shape
    _gemv_kernel[(triton.cdiv(n, block_n),)](x, w, out, n, k, BLOCK_N=block_n, BLOCK_K=block_k, num_warps=num_warps)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=32)
    args = ap.parse_args()
    bw = copy_bandwidth_gbps()
    print(f"device {torch.cuda.get_device_name()}, copy bandwidth {bw:.0f} GB/s, torch {torch.__version__}, "
          f"triton {triton.__version__}")
    rows = []
    for name, (n, k) in SHAPES.items():
        weights = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(args.layers)]
        nbytes = n * k * 2
        for m in (1, 16, 64):
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            ms = graphed_ms(lambda i: F.linear(x, weights[i]), args.layers)
            best = ""
            if m == 1:
                out = torch.empty(n, device="cuda", dtype=torch.bfloat16)
                ref = F.linear(x, weights[0]).float()[0]
                timed = []
                for config in GEMV_CONFIGS:
                    gemv(x[0], weights[0], out, config)
                    err = ((out.float() - ref).norm() / ref.norm()).item()
                    if not err < 1e-2:
                        raise AssertionError(f"gemv {config} relative error {err}")
                    timed.append((graphed_ms(lambda i, c=config: gemv(x[0], weights[i], out, c), args.layers), config))
                g_ms, config = min(timed)
                best = f"{g_ms * 1e3:.1f} us, {nbytes / g_ms / 1e6:.0f} GB/s ({100 * nbytes / g_ms / 1e6 / bw:.0f}%) {config}"
            gbps = nbytes / ms / 1e6
            rows.append(f"| {name} {n}x{k} | {m} | {ms * 1e3:.1f} | {gbps:.0f} | {100 * gbps / bw:.0f}% | {best} |")
        del weights
        torch.cuda.empty_cache()
    print("| projection | batch | torch us | torch GB/s | % of copy | Triton GEMV best (BLOCK_N, BLOCK_K, warps) |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
