"""A Llama-3.1-8B decoder layer's projections at decode batch sizes: the eager chain against the fused GEMVs.

    python scripts/bench_decode_layer.py [--layers 32] [--tokens 1,4,16] [--sweep [--jobs 8]]

"eager chain" is what the layers run without kernels/gemv.py: add+RMSNorm kernel, cuBLAS qkv, cuBLAS o_proj,
add+RMSNorm, cuBLAS gate_up, SiLU-and-mul, cuBLAS down. "fused chain" is models/decode_gemv.py's: at one token
four kernels (norm+qkv, o_proj+residual, norm+gate_up+SiLU-and-mul, down+residual), from two the norms as kernels
of their own (six). Attention and RoPE are left out (the same kernels either way). Each timing is a CUDA graph of
`--layers` layers on distinct weights (nothing stays in L2), replayed; median of triton.testing.do_bench.
`--sweep` also times each projection over a grid of tiles. Prints markdown tables.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
import torch.nn.functional as F
import triton

from specbench.perf.gpu_perf import copy_bandwidth_gbps
from specbench.perf.graph_timing import graphed_ms

from specbench.kernels.activation import silu_and_mul
from specbench.kernels.gemv import GemvConfig, default_config, gemv
from specbench.kernels.rms_norm import rms_norm

HIDDEN, QKV, Q_SIZE, INTER = 4096, 6144, 4096, 14336
EPS = 1e-5
SWEEP = [GemvConfig(bn, bk, w, False) for bn in (2, 4, 8, 16) for bk in (512, 1024, 2048) for w in (4, 8)]
# (block_n, block_k, warps, stages, programs per SM (0: one per tile)); persistent ones flatten the pipeline
SWEEP_DOT = [
    GemvConfig(bn, bk, warps, True, stages, programs_per_sm=pps, is_flat=pps > 0)
    for bn, bk, warps, stages, pps in (
        (16, 256, 4, 3, 0), (32, 128, 4, 4, 0), (32, 256, 4, 3, 0), (32, 256, 4, 4, 0), (32, 512, 4, 3, 0),
        (64, 128, 4, 4, 0), (64, 256, 4, 3, 0), (64, 256, 8, 3, 0), (64, 128, 8, 4, 0), (128, 128, 8, 3, 0),
        (16, 256, 4, 4, 1), (32, 256, 4, 4, 1), (32, 256, 4, 5, 1), (32, 512, 4, 3, 1), (16, 256, 4, 4, 2),
        (32, 256, 4, 3, 2), (64, 128, 4, 4, 1))
]


class Weights:
    def __init__(self, num_layers: int) -> None:
        def rand(*shape):
            return [torch.randn(*shape, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(num_layers)]

        self.qkv, self.o, self.gate_up, self.down = rand(QKV, HIDDEN), rand(HIDDEN, Q_SIZE), rand(2 * INTER, HIDDEN), \
            rand(HIDDEN, INTER)
        self.norm1 = [1 + 0.1 * torch.randn(HIDDEN, device="cuda", dtype=torch.bfloat16) for _ in range(num_layers)]
        self.norm2 = [1 + 0.1 * torch.randn(HIDDEN, device="cuda", dtype=torch.bfloat16) for _ in range(num_layers)]
        self.nbytes = 2 * HIDDEN * (QKV + Q_SIZE + 3 * INTER)  # per layer


def eager_layer(w: Weights, i: int, hidden, residual, attn):
    normed, stream = rms_norm(hidden, w.norm1[i], EPS, residual)
    F.linear(normed, w.qkv[i])
    o = F.linear(attn, w.o[i])
    normed, stream = rms_norm(o, w.norm2[i], EPS, stream)
    return F.linear(silu_and_mul(F.linear(normed, w.gate_up[i])), w.down[i]), stream


def fused_layer(w: Weights, i: int, stream, attn, tiles: dict[str, GemvConfig] | None = None):
    """What models/decode_gemv.py runs: the norms inside the projections at one token, kernels of their own from
    two. `tiles`: a config per sweep case (None: the kernel's defaults)."""
    tiles = tiles or {}
    if stream.shape[0] == 1:
        gemv(stream, w.qkv[i], norm_weight=w.norm1[i], eps=EPS, config=tiles.get("norm+qkv"))
    else:
        gemv(rms_norm(stream, w.norm1[i], EPS)[0], w.qkv[i], config=tiles.get("qkv"))
    stream = gemv(attn, w.o[i], residual=stream, config=tiles.get("o_proj+res"))
    if stream.shape[0] == 1:
        act = gemv(stream, w.gate_up[i], norm_weight=w.norm2[i], eps=EPS, is_gated=True,
                   config=tiles.get("norm+gate_up+silu"))
    else:
        act = gemv(rms_norm(stream, w.norm2[i], EPS)[0], w.gate_up[i], is_gated=True,
                   config=tiles.get("gate_up+silu"))
    return gemv(act, w.down[i], residual=stream, config=tiles.get("down+res"))


def chains(w: Weights, m: int, num_layers: int, bw: float, tiles: dict[str, GemvConfig] | None) -> list[str]:
    hidden = torch.randn(m, HIDDEN, device="cuda", dtype=torch.bfloat16)
    attn = torch.randn(m, Q_SIZE, device="cuda", dtype=torch.bfloat16)
    state = {"h": hidden, "r": hidden.clone(), "s": hidden.clone()}

    def eager(i):
        state["h"], state["r"] = eager_layer(w, i, state["h"], state["r"], attn)

    def fused(i, tiles=None):
        state["s"] = fused_layer(w, i, state["s"], attn, tiles)

    rows = []
    cases = [("eager chain", eager), ("fused chain", fused)]
    if tiles is not None:
        cases.append(("fused chain, best tiles of the sweep", lambda i: fused(i, tiles)))
    for name, fn in cases:
        ms = graphed_ms(fn, num_layers)
        gbps = w.nbytes / ms / 1e6
        rows.append(f"| {m} | {name} | {ms * 1e3:.1f} | {gbps:.0f} | {100 * gbps / bw:.1f}% |")
    return rows


def check_numerics(w: Weights, tokens=(1, 16, 64), tiles: dict[str, GemvConfig] | None = None) -> str:
    errors = []
    for m in tokens:
        stream = torch.randn(m, HIDDEN, device="cuda", dtype=torch.bfloat16)
        attn = torch.randn(m, Q_SIZE, device="cuda", dtype=torch.bfloat16)
        ref, ref_stream = eager_layer(w, 0, stream, torch.zeros_like(stream), attn)
        want = (ref + ref_stream).float()
        err = ((fused_layer(w, 0, stream, attn, tiles).float() - want).norm() / want.norm()).item()
        if not err < 1e-2:
            raise AssertionError(f"fused layer at {m} tokens: relative error {err}")
        errors.append(f"{err:.2e} at {m} tokens")
    return f"fused layer{'' if tiles is None else ', best tiles'} vs eager chain, relative error " + ", ".join(errors)


def sweep_cases(w: Weights, m: int) -> dict[str, tuple[Callable[[int, GemvConfig | None], object], int]]:
    """name -> (fn(layer, config), weight elements): the projections as decode_gemv runs them at `m` tokens."""
    x_h = torch.randn(m, HIDDEN, device="cuda", dtype=torch.bfloat16)
    x_i = torch.randn(m, INTER, device="cuda", dtype=torch.bfloat16)
    if m == 1:
        cases = {
            "norm+qkv": (lambda i, c: gemv(x_h, w.qkv[i], norm_weight=w.norm1[i], eps=EPS, config=c), QKV * HIDDEN),
            "norm+gate_up+silu": (lambda i, c: gemv(x_h, w.gate_up[i], norm_weight=w.norm2[i], eps=EPS,
                                                    is_gated=True, config=c), 2 * INTER * HIDDEN),
        }
    else:
        cases = {
            "qkv": (lambda i, c: gemv(x_h, w.qkv[i], config=c), QKV * HIDDEN),
            "gate_up+silu": (lambda i, c: gemv(x_h, w.gate_up[i], is_gated=True, config=c), 2 * INTER * HIDDEN),
        }
    cases["o_proj+res"] = (lambda i, c: gemv(x_h, w.o[i], residual=x_h, config=c), HIDDEN * Q_SIZE)
    cases["down+res"] = (lambda i, c: gemv(x_i, w.down[i], residual=x_h, config=c), HIDDEN * INTER)
    return cases


def _compile_some(m: int, configs: list[GemvConfig]) -> None:
    """Runs each sweep case once on one layer's weights (the same shapes, so the same kernel cache entries)."""
    for fn, _ in sweep_cases(Weights(1), m).values():
        for c in configs:
            try:
                fn(0, c)
            except Exception:  # a tile too big for shared memory or registers: the sweep skips it
                continue
    torch.cuda.synchronize()


def precompile(m: int, configs: list[GemvConfig], jobs: int) -> None:
    """Triton compiles one kernel at a time per process; its on-disk cache lets worker processes fill it first."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_compile_some, args=(m, configs[j::jobs])) for j in range(jobs)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()


def sweep(w: Weights, m: int, bw: float, jobs: int = 1) -> tuple[list[str], dict[str, GemvConfig]]:
    cases = sweep_cases(w, m)
    configs = SWEEP if m == 1 else SWEEP_DOT
    if jobs > 1:
        precompile(m, configs, jobs)
    rows, best_tiles = [], {}
    for name, (fn, numel) in cases.items():
        timed = []
        for config in configs:
            try:
                timed.append((graphed_ms(lambda i, c=config: fn(i, c), len(w.qkv)), config))
            except Exception:  # a tile too big for shared memory or registers
                continue
        timed.sort(key=lambda t: t[0])
        best_tiles[name] = timed[0][1]
        default = graphed_ms(lambda i: fn(i, None), len(w.qkv))
        best = ", ".join(f"{ms * 1e3:.1f} us {100 * 2 * numel / ms / 1e6 / bw:.0f}% ({tile_name(c)})"
                         for ms, c in timed[:4])
        rows.append(f"| {m} | {name} | {default * 1e3:.1f} us {100 * 2 * numel / default / 1e6 / bw:.0f}% | {best} |")
    return rows, best_tiles


def tile_name(c: GemvConfig) -> str:
    kind = f"dot/{c.num_stages}" if c.is_dot else "bc"
    if c.programs_per_sm:
        kind += f" x{c.programs_per_sm}/SM" + (" flat" if c.is_flat else "")
    return f"{c.block_n},{c.block_k},{c.num_warps},{kind}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--tokens", default="1,4,16")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--jobs", type=int, default=8, help="processes compiling the sweep's kernels ahead of timing")
    args = ap.parse_args()
    bw = copy_bandwidth_gbps()
    print(f"device {torch.cuda.get_device_name()}, copy bandwidth {bw:.0f} GB/s, torch {torch.__version__}, "
          f"triton {triton.__version__}")
    w = Weights(args.layers)
    print(check_numerics(w))
    tokens = [int(t) for t in args.tokens.split(",")]
    best_tiles: dict[int, dict[str, GemvConfig]] = {}
    if args.sweep:
        print("| tokens | projection | default tiles | best four (block_n, block_k, warps, kind) |")
        print("| --- | --- | --- | --- |")
        for m in tokens:
            rows, best_tiles[m] = sweep(w, m, bw, args.jobs)
            print("\n".join(rows), flush=True)
        for m in tokens:  # after the table, which a line of prose would cut in two
            print(check_numerics(w, (m,), best_tiles[m]))
    print("| tokens | chain | us per layer | GB/s | % of copy |")
    print("| --- | --- | --- | --- | --- |")
    for m in tokens:
        print("\n".join(chains(w, m, args.layers, bw, best_tiles.get(m))), flush=True)
    for m in tokens:
        has_norm = m == 1
        print(f"default tiles at {m} tokens: qkv {tile_name(default_config(m, HIDDEN, has_norm, False, False))}"
              f", gate_up {tile_name(default_config(m, HIDDEN, has_norm, True, False))}"
              f", o_proj / down {tile_name(default_config(m, INTER, False, False, True))}")


if __name__ == "__main__":
    main()
