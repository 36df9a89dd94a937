"""Top-k expert routing of a batch of tokens, shared by the torch reference and the fused Triton path.

Routing is per token (no capacity, no cross-token state), so a padded row of a CUDA-graph batch could only leak into
real rows through what comes after: the sort by expert and the combine. Padded rows are therefore routed to no
expert at all: their ids are `num_experts` (one past the last expert) and their weights zero, so they are sorted
behind every real slot, counted in no expert's range, wake no expert and read no weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.models.moe_config import MoeConfig


@dataclass(frozen=True)
class ExpertRouting:
    topk_ids: torch.Tensor  # [num_tokens, k] int64, distinct per real row; num_experts on padded rows
    topk_weights: torch.Tensor  # [num_tokens, k] fp32; zero on padded rows


def route(
    config: MoeConfig,
    router_logits: torch.Tensor,  # [num_tokens, num_experts] fp32 (router bias included)
    correction_bias: torch.Tensor | None,  # [num_experts] fp32, selection only (has_score_correction_bias)
    is_real_token: torch.Tensor | None,  # [num_tokens] bool; None: every row is real
) -> ExpertRouting:
    """Each token's k experts and their weights; no host sync (CUDA-graph safe)."""
    k = config.num_experts_per_tok
    if config.scoring == "topk_softmax":
        top_logits, topk_ids = torch.topk(router_logits, k, dim=-1)
        weights = torch.softmax(top_logits, dim=-1)
    else:
        scores = torch.softmax(router_logits, dim=-1) if config.scoring == "softmax" else router_logits.sigmoid()
        for_choice = scores if correction_bias is None else scores + correction_bias
        topk_ids = torch.topk(for_choice, k, dim=-1).indices
        weights = scores.gather(1, topk_ids)
        if config.norm_topk_prob:
            # Sigmoid scores can all be tiny: the epsilon keeps the division finite (as DeepSeek-V3 and GLM do).
            weights = weights / (weights.sum(dim=-1, keepdim=True) + (1e-20 if config.scoring == "sigmoid" else 0.0))
    weights = weights * config.routed_scaling_factor
    if is_real_token is not None:
        is_real = is_real_token[:, None]
        topk_ids = torch.where(is_real, topk_ids, config.num_experts)
        weights = torch.where(is_real, weights, 0.0)
    return ExpertRouting(topk_ids=topk_ids, topk_weights=weights.float())
