"""The routed experts alone, "gemv" set vs "grouped" set (models/moe_kernel_sets.py), on an engine's own MoE layers:
scripts/bench_moe_before_after.py's kernel rows beside its engine rows, and the down + combine tile candidates it
tries (kernels/moe_down_combine.py), so one device call says which tiles to keep.

Each timed call runs every MoE layer of the model once (a graph of them: every layer reads its own weights, nothing
stays in L2), on random inputs routed by the layer's router; the bytes are the distinct experts each layer woke.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from specbench.models.moe import MoeMLP

# (block_n, expert_stages, is_prefetched): kernels/moe_down_combine.py DownCombineTiles; the first is the default.
GROUPED_DOWN_CANDIDATES = ((2, 1, False), (2, 2, False), (2, 1, True), (4, 1, True), (1, 1, True))


@dataclass(frozen=True)
class ExpertTiming:
    num_tokens: int
    mean_active_experts: float  # distinct experts a layer woke, mean over layers
    gb_per_layer: float  # those experts' weights
    gemv_us: float  # per layer, the "gemv" set
    grouped_us: float  # per layer, the "grouped" set with its default tiles
    best_down: str  # the fastest down + combine candidate, "block_n x expert_stages", "+p": prefetched
    best_grouped_us: float

    def to_dict(self) -> dict:
        return asdict(self)


def time_expert_sets(model: torch.nn.Module, num_tokens: int, *, seed: int = 0) -> ExpertTiming:
    """CUDA (the CPU interpreter for tests, with graphed_ms stubbed). Routing is made once per layer outside the
    timed graphs (the same for both sets)."""
    from specbench.kernels.moe_down_combine import DownCombineTiles, default_down_combine_tiles
    from specbench.kernels.moe_few_token import few_token_experts
    from specbench.kernels.moe_gemv import expert_gemv
    from specbench.perf import graph_timing

    layers = [m for m in model.modules() if isinstance(m, MoeMLP)]
    device, dtype = layers[0].gate_up_weight.device, layers[0].gate_up_weight.dtype
    gen = torch.Generator(device=device).manual_seed(seed)
    xs, routings = [], []
    with torch.no_grad():
        for moe in layers:
            x = torch.randn(num_tokens, moe.config.hidden_size, generator=gen, device=device).to(dtype)
            xs.append(x)
            routings.append(moe.route(x))
    active = [float(r.topk_ids.unique().numel()) for r in routings]
    per_expert = [(m.gate_up_weight[0].numel() + m.down_weight[0].numel()) * m.gate_up_weight.element_size()
                  for m in layers]
    gb = sum(a * b for a, b in zip(active, per_expert)) / len(layers) / 1e9

    def timed(run) -> float:
        with torch.no_grad():
            return 1e3 * graph_timing.graphed_ms(lambda i: run(layers[i], xs[i], routings[i]), len(layers))

    def gemv(moe, x, r):
        return expert_gemv(x, r.topk_ids, r.topk_weights, moe.gate_up_weight, moe.down_weight, **moe._expert_args())

    def grouped(down_tiles):
        def run(moe, x, r):
            return few_token_experts(x, r.topk_ids, r.topk_weights, moe.gate_up_weight, moe.down_weight,
                                     down_tiles=down_tiles, **moe._expert_args())
        return run

    inter = layers[0].config.moe_intermediate_size
    default = default_down_combine_tiles(num_tokens, inter)
    results = {}
    for candidate in GROUPED_DOWN_CANDIDATES:
        block_n, stages, is_prefetched = candidate
        tiles = DownCombineTiles(block_n=block_n, block_k=default.block_k, num_warps=default.num_warps,
                                 expert_stages=stages, is_prefetched=is_prefetched)
        name = f"{block_n}x{stages}{'+p' if is_prefetched else ''}"
        try:
            results[name] = timed(grouped(tiles))
        except Exception:  # noqa: BLE001 - a candidate that fails to compile (resources, pipeliner) is no winner
            if candidate == GROUPED_DOWN_CANDIDATES[0]:
                raise  # the default tiles must run
            results[name] = float("inf")
    best = min(results, key=results.get)
    return ExpertTiming(num_tokens=num_tokens, mean_active_experts=sum(active) / len(active), gb_per_layer=gb,
                        gemv_us=timed(gemv), grouped_us=results["2x1"],
                        best_down=best, best_grouped_us=results[best])
