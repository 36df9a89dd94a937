"""Which path a MoE layer of the decoder takes for one forward, and which of its rows are real.

Decode, verify and draft batches of up to `kernels/moe.py`'s MAX_TOKENS take the grouped Triton kernels wherever the
fused-kernel policy runs kernels (CUDA; CPU only under the interpreter); prefill and the CPU take the torch
reference. Both get `is_real_token` from the slot mapping: a CUDA-graph padding row (slot PADDING_SLOT) routes to no
expert, so its garbage input can wake no expert and change no real row's output.
"""

from __future__ import annotations

import torch

from specbench.attention.metadata import PADDING_SLOT, AttentionMetadata
from specbench.models import fused_kernels
from specbench.models.moe import MoeMLP


def uses_fused_experts(x: torch.Tensor) -> bool:  # x: [num_tokens, hidden]
    """Depends on shapes and the fused-kernel policy only (never on values): a CUDA graph captures one path."""
    if not fused_kernels.use_fused(x):
        return False
    # Imported once the policy says kernels run: the first `import triton` fixes its interpreter mode.
    from specbench.kernels.moe import MAX_TOKENS

    return 1 <= x.shape[0] <= MAX_TOKENS


def moe_forward(
    mlp: MoeMLP,
    x: torch.Tensor,  # [num_tokens, hidden]
    md: AttentionMetadata,
) -> torch.Tensor:  # [num_tokens, hidden]
    is_real_token = md.slot_mapping != PADDING_SLOT  # [num_tokens] bool
    return mlp(x, is_real_token, is_fused=uses_fused_experts(x))
