"""The routed-expert kernels alone at decode and verify batch sizes: the engine's (kernels/moe_gemv.py) under their
default tiles and under every candidate tile, and the best per shape. (The previous design, kernels/moe.py, was
deleted once TUNED held the H100 winners; BENCHMARKS.md "Session 12" has it beside these.)

    python scripts/bench_moe_kernels.py [--shapes qwen3-30b-a3b,gpt-oss-20b] [--tokens 1,4,16,64] [--layers 4]
    TRITON_INTERPRET=1 python scripts/bench_moe_kernels.py --tiny   # CPU, tiny shapes: a crash test, timings meaningless

Routing is random top-k (distinct experts per token, softmax weights, fixed seed), already sorted by expert: only
the expert kernels are timed. Each timing is a CUDA graph of one call per layer (`--layers` distinct weight sets,
so nothing stays in L2), replayed; us are per layer. `GB read` counts the active experts' weights and biases (the
floor of what the kernels must read); `% of copy` is against a measured device-to-device copy. gate_up and down
candidates are timed apart (down on gate_up's output), then the best pair together. Each candidate's output is
checked against the default tiles' (a MISMATCH never wins). The last lines are
`kernels/moe_tiles.TUNED` entries to paste, after a summary table: default and best side by side.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass

import torch
from specbench.kernels.moe_tiles import (
    ExpertTiles,
    ProjectionTiles,
    default_tiles,
    token_bucket,
)

from specbench.perf.graph_timing import graphed_ms
from specbench.perf.moe_shapes import TINY_SHAPES, preset_shape, real_shapes
from specbench.models.moe_config import MoeConfig

SHAPES = real_shapes()
TINY = TINY_SHAPES

# The CUDA cores: (rows a program, K step, warps). gemv.py's one-token Llama-8B winner is (2, 2048, 8). Past one
# token (the grouped kernels, a pass over the tile per token of the expert) only the first CORES_PAST_ONE of each.
CORE_GATE_UP = [ProjectionTiles(is_dot=False, block_n=n, block_k=k, num_warps=w)
                for n, k, w in ((2, 2048, 8), (4, 2048, 8), (2, 1024, 4), (1, 2048, 4), (4, 1024, 8), (1, 4096, 8))]
CORE_DOWN = [ProjectionTiles(is_dot=False, block_n=n, block_k=k, num_warps=w)
             for n, k, w in ((2, 1024, 8), (4, 1024, 8), (2, 1024, 4), (1, 1024, 4), (8, 512, 8), (4, 256, 4))]
CORES_PAST_ONE = 3
# Tensor cores: (rows a program, K step, warps, stages, tokens an MMA step). gemv.py's: gated (64, 128, 4, 4),
# down (32, 512) at <= 16 tokens, (32, 256, 5 stages) at 64; the deleted kernels/moe.py's gate_up: (16, 256) up to
# 16 tokens, (32, 128) past.
DOT_GATE_UP = [ProjectionTiles(is_dot=True, block_n=n, block_k=k, num_warps=w, num_stages=s, block_m=m)
               for n, k, w, s, m in ((16, 256, 4, 3, 16), (32, 128, 4, 3, 16), (32, 256, 4, 3, 16),
                                     (64, 128, 4, 4, 16), (16, 512, 4, 3, 16), (32, 128, 4, 4, 32))]
DOT_DOWN = [ProjectionTiles(is_dot=True, block_n=n, block_k=k, num_warps=w, num_stages=s, block_m=m)
            for n, k, w, s, m in ((16, 256, 4, 3, 16), (32, 256, 4, 3, 16), (32, 512, 4, 3, 16),
                                  (64, 128, 4, 4, 16), (16, 512, 4, 4, 16), (32, 256, 4, 5, 32))]
MISMATCH = 3e-2  # max |diff| / max |default's output| past which a candidate is a MISMATCH (bf16 outputs)


@dataclass(frozen=True)
class Layer:
    gate_up_weight: torch.Tensor  # [E, 2 * inter, hidden]
    down_weight: torch.Tensor  # [E, hidden, inter]
    gate_up_bias: torch.Tensor | None  # [E, 2 * inter]
    down_bias: torch.Tensor | None  # [E, hidden]


@dataclass(frozen=True)
class Batch:
    x: torch.Tensor  # [num_tokens, hidden]
    topk_ids: torch.Tensor  # [num_tokens, k] int64
    topk_weights: torch.Tensor  # [num_tokens, k] fp32
    order: object  # kernels.moe_sort.ExpertSort
    num_active_experts: int


@dataclass(frozen=True)
class Row:
    shape: str
    num_tokens: int
    part: str  # "experts" (both kernels), "gate_up" or "down"
    label: str
    num_active_experts: float
    num_bytes: float  # per layer
    us: float  # per layer; nan when the candidate failed
    note: str = ""


def make_layers(config: MoeConfig, num_layers: int, device: torch.device, dtype: torch.dtype) -> list[Layer]:
    gen = torch.Generator(device=device).manual_seed(0)
    e, h, i = config.num_experts, config.hidden_size, config.moe_intermediate_size

    def randn(*shape, std):
        return (torch.randn(*shape, generator=gen, device=device, dtype=dtype) * std).contiguous()

    return [Layer(gate_up_weight=randn(e, 2 * i, h, std=h ** -0.5), down_weight=randn(e, h, i, std=i ** -0.5),
                  gate_up_bias=randn(e, 2 * i, std=0.02) if config.has_expert_bias else None,
                  down_bias=randn(e, h, std=0.02) if config.has_expert_bias else None)
            for _ in range(num_layers)]


def make_batch(config: MoeConfig, num_tokens: int, seed: int, device: torch.device, dtype: torch.dtype) -> Batch:
    from specbench.kernels.moe_sort import sort_by_expert_reference

    gen = torch.Generator(device=device).manual_seed(seed)
    scores = torch.rand(num_tokens, config.num_experts, generator=gen, device=device)
    topk_ids = scores.topk(config.num_experts_per_tok, dim=-1).indices  # random distinct experts per token
    topk_weights = torch.softmax(torch.randn(topk_ids.shape, generator=gen, device=device), dim=-1)
    x = torch.randn(num_tokens, config.hidden_size, generator=gen, device=device).to(dtype)
    order = sort_by_expert_reference(topk_ids, config.num_experts)
    return Batch(x, topk_ids, topk_weights, order, int(order.num_active_experts.item()))


def bytes_per_expert(layer: Layer) -> tuple[int, int]:
    """(gate_up, down) bytes of one expert's weights and biases."""
    def size(*tensors):
        return sum(t[0].numel() * t.element_size() for t in tensors if t is not None)

    return size(layer.gate_up_weight, layer.gate_up_bias), size(layer.down_weight, layer.down_bias)


def time_us(fn, num_calls: int, device: torch.device) -> float:
    """Per-call us of fn(0) .. fn(num_calls - 1): a CUDA graph of them, replayed (perf/graph_timing.py); off CUDA
    (the interpreter's crash run) wall time, meaningless as a timing."""
    if device.type == "cuda":
        return 1e3 * graphed_ms(fn, num_calls)
    start = time.perf_counter()
    for i in range(num_calls):
        fn(i)
    return (time.perf_counter() - start) * 1e6 / num_calls


def rel_diff(got: torch.Tensor, expected: torch.Tensor) -> float:
    return ((got.float() - expected.float()).abs().max() / expected.float().abs().max().clamp_min(1e-30)).item()


def bench_tokens(name: str, config: MoeConfig, layers: list[Layer], num_tokens: int, device: torch.device,
                 dtype: torch.dtype) -> tuple[list[Row], ExpertTiles | None]:
    from specbench.kernels.moe_gemv import (
        expert_down_combine,
        expert_gate_up,
        expert_gemv,
    )
    from triton.errors import TritonError

    num_layers = len(layers)
    batches = [make_batch(config, num_tokens, 1000 * num_tokens + i, device, dtype) for i in range(num_layers)]
    num_active = sum(b.num_active_experts for b in batches) / num_layers
    gate_up_bytes, down_bytes = (num_active * n for n in bytes_per_expert(layers[0]))
    is_oai = config.activation == "swiglu_oai"
    oai = {"is_swiglu_oai": is_oai, "swiglu_alpha": config.swiglu_alpha, "swiglu_limit": config.swiglu_limit}
    default = default_tiles(num_tokens, config.hidden_size, config.moe_intermediate_size,
                            torch.empty((), dtype=dtype).element_size())

    def experts(i: int, tiles: ExpertTiles | None):
        b, w = batches[i], layers[i]
        return expert_gemv(b.x, b.topk_ids, b.topk_weights, w.gate_up_weight, w.down_weight,
                           gate_up_bias=w.gate_up_bias, down_bias=w.down_bias, tiles=tiles, order=b.order, **oai)

    def gate_up(i: int, tiles: ProjectionTiles):
        b, w = batches[i], layers[i]
        return expert_gate_up(b.x, b.topk_ids, b.order, w.gate_up_weight, w.gate_up_bias, tiles, **oai)

    slot_weights = [b.topk_weights.reshape(-1).float().contiguous() for b in batches]
    with torch.no_grad():
        acts = [gate_up(i, default.gate_up) for i in range(num_layers)]
        expected_out = [experts(i, default) for i in range(num_layers)]

    def down(i: int, tiles: ProjectionTiles):
        b, w = batches[i], layers[i]
        return expert_down_combine(acts[i], b.topk_ids, slot_weights[i], b.order, w.down_weight, w.down_bias, tiles)

    def measure(part: str, label: str, num_bytes: float, fn, expected: list[torch.Tensor] | None) -> Row:
        try:
            with torch.no_grad():
                note = ""
                if expected is not None:
                    worst = max(rel_diff(fn(i), expected[i]) for i in range(num_layers))
                    note = f"MISMATCH vs the defaults: max diff {worst:.1e}" if not worst <= MISMATCH else ""
                us = time_us(fn, num_layers, device)
        except (TritonError, RuntimeError, ValueError) as error:  # a candidate that fails to compile is reported
            return Row(name, num_tokens, part, label, num_active, num_bytes, float("nan"),
                       f"failed: {type(error).__name__}: {str(error).splitlines()[0][:120]}")
        return Row(name, num_tokens, part, label, num_active, num_bytes, us, note)

    total_bytes = gate_up_bytes + down_bytes
    rows = [measure("experts", f"default: {tiles_label(default)}", total_bytes, lambda i: experts(i, default), None)]
    num_cores = len(CORE_GATE_UP) if num_tokens == 1 else CORES_PAST_ONE
    gate_up_rows = {t: measure("gate_up", projection_label(t), gate_up_bytes, lambda i, t=t: gate_up(i, t), acts)
                    for t in dict.fromkeys(CORE_GATE_UP[:num_cores] + DOT_GATE_UP)}
    down_rows = {t: measure("down", projection_label(t), down_bytes, lambda i, t=t: down(i, t), expected_out)
                 for t in dict.fromkeys(CORE_DOWN[:num_cores] + DOT_DOWN)}
    best_gate_up, best_down = fastest(gate_up_rows), fastest(down_rows)
    best = None
    if best_gate_up is not None and best_down is not None:
        best = ExpertTiles(best_gate_up, best_down)
        rows.append(measure("experts", f"best: {tiles_label(best)}", total_bytes, lambda i: experts(i, best),
                            expected_out))
    rows += list(gate_up_rows.values()) + list(down_rows.values())
    return rows, best


def fastest(rows: dict[ProjectionTiles, Row]) -> ProjectionTiles | None:
    ok = {t: r.us for t, r in rows.items() if not r.note and not math.isnan(r.us)}
    return min(ok, key=ok.get) if ok else None


def projection_label(t: ProjectionTiles) -> str:
    if not t.is_dot:
        return f"cores n{t.block_n} k{t.block_k} {t.num_warps}w"
    return f"dot n{t.block_n} k{t.block_k} m{t.block_m} {t.num_warps}w {t.num_stages}st"


def tiles_label(t: ExpertTiles) -> str:
    return f"gate_up {projection_label(t.gate_up)} / down {projection_label(t.down)}"


def format_rows(rows: list[Row], copy_gbps: float | None) -> list[str]:
    lines = ["| shape | tokens | part | tiles | active experts | GB read | us | GB/s | % of copy | note |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        gbps = r.num_bytes / r.us / 1e3
        share = f"{100 * gbps / copy_gbps:.1f}%" if copy_gbps and not math.isnan(gbps) else "n/a"
        lines.append(f"| {r.shape} | {r.num_tokens} | {r.part} | {r.label} | {r.num_active_experts:.1f} | "
                     f"{r.num_bytes / 1e9:.4f} | {r.us:.1f} | {gbps:.0f} | {share} | {r.note} |")
    return lines


def format_summary(rows: list[Row], copy_gbps: float | None) -> list[str]:
    """Both kernels together, per shape and batch: the defaults and the best pair side by side."""
    lines = ["| shape | tokens | GB read | default us (% of copy) | best us (% of copy) |",
             "| --- | --- | --- | --- | --- |"]
    cells: dict[tuple[str, int], dict[str, Row]] = {}
    for r in rows:
        if r.part == "experts":
            cells.setdefault((r.shape, r.num_tokens), {})[r.label.split(" ")[0].rstrip(":")] = r

    def cell(r: Row | None) -> str:
        if r is None or math.isnan(r.us):
            return "n/a"
        share = f" ({100 * r.num_bytes / r.us / 1e3 / copy_gbps:.1f}%)" if copy_gbps else ""
        return f"{r.us:.1f}{share}" + (" MISMATCH" if r.note else "")

    for (shape, num_tokens), by_kind in cells.items():
        first = next(iter(by_kind.values()))
        lines.append(f"| {shape} | {num_tokens} | {first.num_bytes / 1e9:.4f} | "
                     f"{cell(by_kind.get('default'))} | {cell(by_kind.get('best'))} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4, help="distinct weight sets per timing (defeats L2)")
    ap.add_argument("--tokens", default="1,4,16,64")
    ap.add_argument("--shapes", help="comma-separated (all by default)")
    ap.add_argument("--tiny", action="store_true", help=f"CPU under TRITON_INTERPRET=1, shapes {', '.join(TINY)}")
    args = ap.parse_args()
    table = TINY if args.tiny else SHAPES
    names = args.shapes.split(",") if args.shapes else list(table)
    if not args.tiny:  # any registered MoE preset too (a hybrid's experts: qwen3-next-80b-a3b)
        table = {**table, **{n: shape for n in names if n not in table and (shape := preset_shape(n)) is not None}}
    unknown = [s for s in names if s not in table]
    if unknown:
        ap.error(f"unknown shape {unknown[0]!r}; supported: {', '.join(table)}")
    tokens = [int(t) for t in args.tokens.split(",")]
    if any(not 1 <= t <= 64 for t in tokens):
        ap.error("--tokens must be between 1 and 64")
    import triton
    from specbench.kernels.moe_gemv import is_interpreted_here

    if args.tiny:
        if not is_interpreted_here():
            ap.error("--tiny needs TRITON_INTERPRET=1 (set before the first triton import)")
        device, dtype = torch.device("cpu"), torch.float32
        torch.set_num_threads(1)  # tiny ops: thread fork/join on a shared CPU costs more than it saves
    else:
        if not torch.cuda.is_available():
            ap.error("needs a CUDA device (or --tiny)")
        device, dtype = torch.device("cuda"), torch.bfloat16
    started = time.perf_counter()
    copy_gbps = None
    header = f"torch {torch.__version__}, triton {triton.__version__}, {args.layers} layers"
    if device.type == "cuda":
        from specbench.perf.gpu_perf import copy_bandwidth_gbps

        copy_gbps = copy_bandwidth_gbps()
        header = f"device {torch.cuda.get_device_name()}, copy bandwidth {copy_gbps:.0f} GB/s, " + header
    print(header)
    rows, winners = [], []
    for name in names:
        config = table[name]
        layers = make_layers(config, args.layers, device, dtype)
        for num_tokens in tokens:
            shape_rows, best = bench_tokens(name, config, layers, num_tokens, device, dtype)
            rows += shape_rows
            if best is not None:
                experts_rows = {r.label.split(":")[0]: r for r in shape_rows if r.part == "experts"}
                winners.append((config, num_tokens, best, experts_rows))
            print(f"{name}, {num_tokens} tokens: done at {time.perf_counter() - started:.0f} s", flush=True)
        del layers
    print("\n".join(format_rows(rows, copy_gbps)))
    print("\n" + "\n".join(format_summary(rows, copy_gbps)))
    print("\n# kernels/moe_tiles.TUNED entries (best gate_up and best down per shape and token bucket):")
    for config, num_tokens, best, experts_rows in winners:
        timing = ", ".join(f"{label} {r.us:.1f} us" for label, r in experts_rows.items())
        print(f"    ({config.hidden_size}, {config.moe_intermediate_size}, {token_bucket(num_tokens)}): {best!r},"
              f"  # {num_tokens} tokens: {timing}")
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
