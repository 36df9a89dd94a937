"""Which path a MoE layer of the decoder takes for one forward, and which of its rows are real.

- Decode, verify and draft batches of up to `kernels/moe_gemv.py`'s MAX_TOKENS take the grouped Triton kernels wherever
  the fused-kernel policy runs kernels (CUDA; CPU only under the interpreter).
- A CUDA graph being captured always takes the kernels, 64 rows at a time past MAX_TOKENS (a verify of k + 1 tokens
  for 64 requests is 256 rows): the torch reference gathers each expert's tokens with `nonzero`, a host sync that
  cannot be captured. This holds under the "off" policy too (Triton must import on a CUDA host for graphs of a MoE
  target).
- Everything else (prefill, the CPU) takes the torch reference, whose per-expert GEMMs suit many rows.
Under the "grouped" kernel set (models/moe_kernel_sets.py) 2 to 16 tokens take the few-token kernels and an
uncaptured batch past 64 tokens the grouped GEMM over experts (prefill) where the policy runs kernels; the forward
records those two paths (execution_paths.py) when handed the engine's recorder.
All paths get `is_real_token` from the slot mapping: a CUDA-graph padding row (slot PADDING_SLOT) routes to no
expert, so its garbage input can wake no expert and change no real row's output.
"""

from __future__ import annotations

import torch

from specbench.attention.metadata import PADDING_SLOT, AttentionMetadata
from specbench.models import fused_kernels
from specbench.models.moe import MoeMLP
from specbench.models.moe_kernel_sets import FEW_TOKEN_PATH, PREFILL_GROUPED_SETS, PREFILL_PATH


def _max_kernel_tokens() -> int:
    # Imported once kernels are about to run: the first `import triton` fixes its interpreter mode.
    from specbench.kernels.moe_gemv import MAX_TOKENS

    return MAX_TOKENS


def uses_fused_experts(mlp: MoeMLP, x: torch.Tensor) -> bool:  # x: [num_tokens, hidden]
    """Depends on shapes and the layer's fused-kernel policy only (never on values): a CUDA graph captures one path."""
    return fused_kernels.use_fused(mlp.fused_policy, x) and 1 <= x.shape[0] <= _max_kernel_tokens()


def is_capturing(x: torch.Tensor) -> bool:
    return x.is_cuda and torch.cuda.is_current_stream_capturing()


def grouped_path(mlp: MoeMLP, x: torch.Tensor) -> str | None:  # x: [num_tokens, hidden]
    """The "grouped" set's path this forward takes (shapes, policy and the layer's set only), None: another one."""
    if mlp.moe_kernels not in PREFILL_GROUPED_SETS or not fused_kernels.use_fused(mlp.fused_policy, x):
        return None
    from specbench.kernels.moe_down_combine import FEW_MAX_TOKENS

    num_tokens = x.shape[0]
    if mlp.moe_kernels == "grouped" and 2 <= num_tokens <= FEW_MAX_TOKENS:
        return FEW_TOKEN_PATH
    if num_tokens > _max_kernel_tokens() and not is_capturing(x):
        return PREFILL_PATH
    return None


def moe_forward(
    mlp: MoeMLP,
    x: torch.Tensor,  # [num_tokens, hidden]
    md: AttentionMetadata,
    paths=None,  # execution_paths.PathRecorder of the engine (its attention backend's), or None
) -> torch.Tensor:  # [num_tokens, hidden]
    is_real_token = md.slot_mapping != PADDING_SLOT  # [num_tokens] bool
    path = grouped_path(mlp, x)
    if path is not None and paths is not None:
        paths.record(path)
    if path == PREFILL_PATH or uses_fused_experts(mlp, x):
        return mlp(x, is_real_token, is_fused=True)
    if not is_capturing(x):
        return mlp(x, is_real_token)
    step = _max_kernel_tokens()
    return torch.cat([mlp(x[i : i + step], is_real_token[i : i + step], is_fused=True)
                      for i in range(0, x.shape[0], step)])
