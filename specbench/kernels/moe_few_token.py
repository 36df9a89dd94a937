"""Routed experts of a decode or verify batch of up to FEW_MAX_TOKENS tokens in two launches after the routing: the
grouped gate_up of kernels/moe_gemv.py (each active expert's gate and up rows read once, all its tokens multiplied
together), then kernels/moe_down_combine.py (each expert's down rows read once, the weighted sum over a token's
experts in the epilogue). One token keeps moe_gemv's one-token kernels on CUDA-core tiles (no sort, the combine
already in the down kernel's registers); otherwise the same contract as moe_gemv.expert_gemv.
"""

from __future__ import annotations

import torch

from specbench.kernels.moe_down_combine import FEW_MAX_TOKENS, DownCombineTiles, expert_down_combine_few
from specbench.kernels.moe_gemv import expert_gate_up, expert_gemv
from specbench.kernels.moe_sort import ExpertSort, sort_by_expert
from specbench.kernels.moe_tiles import ExpertTiles, default_tiles


def few_token_experts(
    x: torch.Tensor,  # [num_tokens, hidden], 1 <= num_tokens <= FEW_MAX_TOKENS
    topk_ids: torch.Tensor,  # [num_tokens, k] int64; num_experts on padded rows
    topk_weights: torch.Tensor,  # [num_tokens, k] fp32; zero on padded rows
    gate_up_weight: torch.Tensor,  # [num_experts, 2 * inter, hidden] contiguous, rows [gate; up]
    down_weight: torch.Tensor,  # [num_experts, hidden, inter] contiguous
    *,
    order: ExpertSort | None = None,  # topk_ids sorted by expert, if already made (kernels/moe_route.py)
    gate_up_bias: torch.Tensor | None = None,  # [num_experts, 2 * inter]
    down_bias: torch.Tensor | None = None,  # [num_experts, hidden]
    is_swiglu_oai: bool = False,
    swiglu_alpha: float = 1.702,
    swiglu_limit: float = 7.0,
    tiles: ExpertTiles | None = None,  # gate_up's (and one token's both); default: moe_tiles.default_tiles
    down_tiles: DownCombineTiles | None = None,  # default: moe_down_combine.default_down_combine_tiles
) -> torch.Tensor:  # [num_tokens, hidden] in x's dtype; zero on padded rows
    num_tokens, hidden = x.shape
    if not 1 <= num_tokens <= FEW_MAX_TOKENS:
        raise ValueError(f"few_token_experts takes 1 to {FEW_MAX_TOKENS} tokens, got {num_tokens}")
    activation = {"is_swiglu_oai": is_swiglu_oai, "swiglu_alpha": swiglu_alpha, "swiglu_limit": swiglu_limit}
    inter = down_weight.shape[2]
    tiles = tiles or default_tiles(num_tokens, hidden, inter, x.element_size())
    if num_tokens == 1:  # expert_gemv's one-token tiles: two launches, the combine in the down kernel already
        return expert_gemv(x, topk_ids, topk_weights, gate_up_weight, down_weight, gate_up_bias=gate_up_bias,
                           down_bias=down_bias, tiles=tiles, order=order, **activation)
    if x.stride(-1) != 1:
        x = x.contiguous()
    topk_ids = topk_ids.contiguous()
    if order is None:
        order = sort_by_expert(topk_ids, gate_up_weight.shape[0])
    act = expert_gate_up(x, topk_ids, order, gate_up_weight, gate_up_bias, tiles.gate_up, **activation)
    slot_weights = topk_weights.reshape(-1).float().contiguous()
    return expert_down_combine_few(act, slot_weights, order, down_weight, down_bias, num_tokens, down_tiles)
