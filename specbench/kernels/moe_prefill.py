"""Routed experts of a prefill (or any batch past the decode kernels' 64 tokens) as a grouped GEMM over experts:
the batch's (token, expert) slots sorted by expert in torch ops (no host sync), then kernels/moe_gemv.py's
tensor-core kernels with prefill-sized tiles. Each program owns a tile of one expert's weight rows and walks that
expert's tokens BLOCK_M at a time, so an expert's weights cross DRAM once per forward (the repeats hit L2) and
every token's rows are multiplied in 64 x 64 MMA tiles, where the eager reference (models/moe.py) runs a
`nonzero` host sync and four small GEMMs per expert.

Tokens go in chunks of at most PREFILL_CHUNK_TOKENS: the fp32 per-slot partials of the down projection are
[chunk * k, hidden] (128 MB at 2048 tokens of Qwen3-30B-A3B) and the chunk bounds them.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from specbench.kernels.moe_gemv import expert_down_combine, expert_gate_up
from specbench.kernels.moe_sort import ExpertSort, sort_by_expert_reference
from specbench.kernels.moe_tiles import ExpertTiles, ProjectionTiles

PREFILL_CHUNK_TOKENS = 2048
# 64 weight rows x 64 tokens per MMA step, 64-wide K steps, 4 stages: a standard Hopper bf16 GEMM tile within
# Triton's shared-memory budget for two weight operands (gate and up) at once.
PREFILL_TILES = ExpertTiles(
    gate_up=ProjectionTiles(is_dot=True, block_n=64, block_k=64, num_warps=4, num_stages=4, block_m=64),
    down=ProjectionTiles(is_dot=True, block_n=64, block_k=64, num_warps=4, num_stages=4, block_m=64),
)


def prefill_sort(
    topk_ids: torch.Tensor,  # [num_tokens, k] int64; num_experts on padded rows
    num_experts: int,
) -> ExpertSort:
    """The batch's slots sorted by expert (torch ops: any number of tokens, no host sync)."""
    return sort_by_expert_reference(topk_ids, num_experts)


def prefill_experts(
    x: torch.Tensor,  # [num_tokens, hidden]
    topk_ids: torch.Tensor,  # [num_tokens, k] int64; num_experts on padded rows
    topk_weights: torch.Tensor,  # [num_tokens, k] fp32; zero on padded rows
    gate_up_weight: torch.Tensor,  # [num_experts, 2 * inter, hidden] contiguous, rows [gate; up]
    down_weight: torch.Tensor,  # [num_experts, hidden, inter] contiguous
    *,
    gate_up_bias: torch.Tensor | None = None,  # [num_experts, 2 * inter]
    down_bias: torch.Tensor | None = None,  # [num_experts, hidden]
    is_swiglu_oai: bool = False,
    swiglu_alpha: float = 1.702,
    swiglu_limit: float = 7.0,
    tiles: ExpertTiles | None = None,  # default PREFILL_TILES
    chunk_tokens: int = PREFILL_CHUNK_TOKENS,
    sort=prefill_sort,  # (topk_ids, num_experts) -> ExpertSort; a seam for the mutants (faults/moe_prefill_*.py)
) -> torch.Tensor:  # [num_tokens, hidden] in x's dtype: sum over k of weight * expert(x); zero on padded rows
    num_tokens, hidden = x.shape
    num_experts = gate_up_weight.shape[0]
    if tiles is None:
        # fp32 (checking runs): the same bytes per pipelined stage, within the shared memory of 16-bit tiles.
        tiles = ExpertTiles(*(replace(t, block_k=max(16, t.block_k * 2 // x.element_size()))
                              for t in (PREFILL_TILES.gate_up, PREFILL_TILES.down)))
    if not (tiles.gate_up.is_dot and tiles.down.is_dot):
        raise ValueError("the prefill grouped GEMM runs tensor-core tiles only")
    if x.stride(-1) != 1:
        x = x.contiguous()
    activation = {"is_swiglu_oai": is_swiglu_oai, "swiglu_alpha": swiglu_alpha, "swiglu_limit": swiglu_limit}
    outs = []
    for start in range(0, num_tokens, chunk_tokens):
        chunk_x = x[start:start + chunk_tokens]
        chunk_ids = topk_ids[start:start + chunk_tokens].contiguous()
        order = sort(chunk_ids, num_experts)
        act = expert_gate_up(chunk_x, chunk_ids, order, gate_up_weight, gate_up_bias, tiles.gate_up, **activation)
        slot_weights = topk_weights[start:start + chunk_tokens].reshape(-1).float().contiguous()
        outs.append(expert_down_combine(act, chunk_ids, slot_weights, order, down_weight, down_bias, tiles.down))
    return outs[0] if len(outs) == 1 else torch.cat(outs)
