"""One MoE layer at decode and verify batch sizes: the fused Triton path (kernels/moe_route.py, kernels/moe_gemv.py)
beside the torch reference.

    python scripts/bench_moe.py [--layers 4] [--tokens 1,16,64] [--shapes qwen3-30b-a3b,gpt-oss-20b]
    TRITON_INTERPRET=1 python scripts/bench_moe.py --tiny   # CPU, tiny shapes: a crash test, timings meaningless

Each row is one layer's forward (router, routing, sort, the routed experts; no shared expert in these shapes) on
random bf16 weights and inputs. `active experts` is the mean over the `--layers` layers (distinct weights, so
nothing stays in L2) of the experts the batch wakes; `MB read` counts their weights (and biases) plus the router's,
the floor of what a step must read. The fused path is a CUDA graph of the layers, replayed (median of
triton.testing.do_bench); the reference loops over experts with host syncs, so it runs eagerly (CUDA events).
Prints a markdown table; `% of copy` is against a measured device-to-device copy. The expert kernels alone, under
every candidate tile: scripts/bench_moe_kernels.py.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import torch

from specbench.perf.moe_shapes import TINY_SHAPES, real_shapes
from specbench.models.moe import MoeMLP
from specbench.models.moe_config import MoeConfig

SHAPES = real_shapes()
TINY = TINY_SHAPES


@dataclass(frozen=True)
class Row:
    shape: str
    num_tokens: int
    path: str
    num_active_experts: float  # mean over layers
    num_bytes: int  # per layer, mean
    ms: float  # per layer


def active_bytes(layer: MoeMLP, x: torch.Tensor) -> tuple[int, int, int]:
    """(experts the batch wakes, bytes of their weights and biases plus the router's, the router's bytes)."""
    num_active = int(torch.unique(layer.route(x).topk_ids).numel())
    per_expert = sum(t[0].numel() * t.element_size() for t in (layer.gate_up_weight, layer.down_weight,
                                                              layer.gate_up_bias, layer.down_bias) if t is not None)
    router = sum(p.numel() * p.element_size() for p in layer.router.parameters())
    return num_active, num_active * per_expert + router, router


def time_eager_ms(fn, num_calls: int, device: torch.device) -> float:
    """Per-call ms of fn(0) .. fn(num_calls - 1), after one warm-up pass."""
    for i in range(num_calls):
        fn(i)
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(num_calls):
            fn(i)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / num_calls
    start_s = time.perf_counter()
    for i in range(num_calls):
        fn(i)
    return (time.perf_counter() - start_s) * 1e3 / num_calls


def make_layers(config: MoeConfig, num_layers: int, device: torch.device, dtype: torch.dtype) -> list[MoeMLP]:
    torch.manual_seed(0)
    layers = []
    for _ in range(num_layers):
        layer = MoeMLP(config).to(device, dtype)
        with torch.no_grad():
            for p in (layer.gate_up_bias, layer.down_bias):
                if p is not None:
                    p.normal_(std=0.02)
        layers.append(layer)
    return layers


def timed_ms(fn, num_calls: int, device: torch.device, is_graphed: bool) -> float:
    with torch.no_grad():
        if device.type == "cuda" and is_graphed:
            from specbench.perf.graph_timing import graphed_ms

            return graphed_ms(fn, num_calls)
        return time_eager_ms(fn, num_calls, device)


def bench_shape(name: str, config: MoeConfig, num_layers: int, tokens: list[int], device: torch.device,
                dtype: torch.dtype, is_fused: bool) -> list[Row]:
    layers = make_layers(config, num_layers, device, dtype)
    rows = []
    for num_tokens in tokens:
        xs = [torch.randn(num_tokens, config.hidden_size, device=device, dtype=dtype) for _ in range(num_layers)]
        counts = [active_bytes(layer, x) for layer, x in zip(layers, xs, strict=True)]
        num_active = sum(c[0] for c in counts) / num_layers
        num_bytes = sum(c[1] for c in counts) // num_layers
        paths = {"torch reference": lambda i, xs=xs: layers[i](xs[i])}
        if is_fused:
            paths["fused (Triton)"] = lambda i, xs=xs: layers[i](xs[i], is_fused=True)
        for path, fn in paths.items():
            ms = timed_ms(fn, num_layers, device, is_graphed=path.startswith("fused"))
            rows.append(Row(name, num_tokens, path, num_active, num_bytes, ms))
    return rows


def check_numerics(config: MoeConfig, device: torch.device, dtype: torch.dtype) -> str:
    """Fused vs reference on the benchmark's own shape: the largest difference relative to the output's scale."""
    torch.manual_seed(1)
    layer = MoeMLP(config).to(device, dtype)
    worst = 0.0
    with torch.no_grad():
        for num_tokens in (1, 16, 64):
            x = torch.randn(num_tokens, config.hidden_size, device=device, dtype=dtype)
            expected = layer(x).float()
            got = layer(x, is_fused=True).float()
            worst = max(worst, ((got - expected).abs().max() / expected.abs().max()).item())
    return f"{worst:.1e}"


def format_rows(rows: list[Row], copy_gbps: float | None) -> list[str]:
    lines = ["| shape | tokens | path | active experts | MB read | us | GB/s | % of copy |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        gbps = r.num_bytes / r.ms / 1e6
        share = f"{100 * gbps / copy_gbps:.1f}%" if copy_gbps else "n/a"
        lines.append(f"| {r.shape} | {r.num_tokens} | {r.path} | {r.num_active_experts:.1f} | "
                     f"{r.num_bytes / 1e6:.1f} | {r.ms * 1e3:.1f} | {gbps:.0f} | {share} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4, help="distinct layers per timing (defeats L2)")
    ap.add_argument("--tokens", default="1,16,64")
    ap.add_argument("--shapes", help=f"comma-separated, of {', '.join(SHAPES)} (all by default)")
    ap.add_argument("--tiny", action="store_true",
                    help=f"CPU, shapes {', '.join(TINY)} (fused path only under TRITON_INTERPRET=1)")
    args = ap.parse_args()
    table = TINY if args.tiny else SHAPES
    names = args.shapes.split(",") if args.shapes else list(table)
    unknown = [s for s in names if s not in table]
    if unknown:
        ap.error(f"unknown shape {unknown[0]!r}; supported: {', '.join(table)}")
    shapes = {s: table[s] for s in names}
    if args.tiny:
        device, dtype = torch.device("cpu"), torch.float32
        torch.set_num_threads(1)  # tiny ops: thread fork/join on a shared CPU costs more than it saves
    else:
        if not torch.cuda.is_available():
            ap.error("needs a CUDA device (or --tiny)")
        device, dtype = torch.device("cuda"), torch.bfloat16
    import triton
    from specbench.kernels.moe_gemv import is_interpreted_here

    is_fused = device.type == "cuda" or is_interpreted_here()
    copy_gbps = None
    header = f"torch {torch.__version__}, triton {triton.__version__}"
    if device.type == "cuda":
        from specbench.perf.gpu_perf import copy_bandwidth_gbps

        copy_gbps = copy_bandwidth_gbps()
        header = f"device {torch.cuda.get_device_name()}, copy bandwidth {copy_gbps:.0f} GB/s, " + header
    print(header + ("" if is_fused else "; fused path skipped (set TRITON_INTERPRET=1 on CPU)"))
    tokens = [int(t) for t in args.tokens.split(",")]
    rows = []
    for name, config in shapes.items():
        if is_fused:
            print(f"{name}: fused vs reference, max |diff| / max |ref| = {check_numerics(config, device, dtype)}")
        rows += bench_shape(name, config, args.layers, tokens, device, dtype, is_fused)
    print("\n".join(format_rows(rows, copy_gbps)))


if __name__ == "__main__":
    main()
