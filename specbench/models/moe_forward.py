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
`normed_moe_forward` is a block's whole MoE half, its norm (and the residual add before it) included: on the fused
path at up to ROUTER_NORM_MAX_TOKENS tokens they ride in the routing kernel's prologue (kernels/moe_route.py
RouterNorm, path moe.route_norm), a launch or two fewer a layer; elsewhere the norm runs first.
All paths get `is_real_token` from the slot mapping: a CUDA-graph padding row (slot PADDING_SLOT) routes to no
expert, so its garbage input can wake no expert and change no real row's output.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.attention.metadata import PADDING_SLOT, AttentionMetadata
from specbench.models import fused_kernels, pending_fusions
from specbench.models.layers import OffsetRMSNorm, RMSNorm
from specbench.models.moe import MoeMLP
from specbench.models.moe_kernel_sets import FEW_TOKEN_PATH, PREFILL_GROUPED_SETS, PREFILL_PATH, ROUTE_NORM_PATH

# Every program of the routing kernel reads the whole rows for the RMS (16 KB a program at 4 tokens, hidden 2048,
# bf16; 256 programs at 512 experts): up to a verify of k + 1 = 4 at concurrency 1, where the launch saved is most of
# the norm's cost. Past it the norm keeps its own launch (not measured beyond).
ROUTER_NORM_MAX_TOKENS = 4


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


@dataclass(frozen=True)
class MoeHalf:
    hidden: torch.Tensor  # [num_tokens, hidden] the MoE output (its residual add left to the next norm)
    stream: torch.Tensor  # [num_tokens, hidden] the stream the MoE half read: x + residual, or x


def norm_rides_in_router(mlp: MoeMLP, norm: RMSNorm, x: torch.Tensor) -> bool:  # x: [num_tokens, hidden]
    """Shapes, dtypes and the fused-kernel policy only (a CUDA graph captures one path): the fused experts at up to
    ROUTER_NORM_MAX_TOKENS tokens, under a plain or offset RMSNorm the kernel computes; opt-in until a GPU run
    (models/pending_fusions.py)."""
    return (pending_fusions.is_on() and type(norm) in (RMSNorm, OffsetRMSNorm) and norm.is_fused(x)
            and x.shape[0] <= ROUTER_NORM_MAX_TOKENS
            and x.stride(-1) == 1 and uses_fused_experts(mlp, x) and grouped_path(mlp, x) != PREFILL_PATH)


def normed_moe_forward(
    mlp: MoeMLP,
    norm: RMSNorm,  # the block's post-attention norm (RMSNorm or OffsetRMSNorm)
    x: torch.Tensor,  # [num_tokens, hidden] the mixer's output (with residual) or the stream itself
    residual: torch.Tensor | None,  # [num_tokens, hidden] the stream before x; None: x is the stream
    md: AttentionMetadata,
    paths=None,  # execution_paths.PathRecorder of the engine, or None
) -> MoeHalf:
    """norm(x [+ residual]), then the MoE forward on it."""
    if not norm_rides_in_router(mlp, norm, x):
        normed, stream = norm.add_and_norm(x, residual)
        return MoeHalf(hidden=moe_forward(mlp, normed, md, paths), stream=stream)
    from specbench.kernels.moe_route import new_router_norm

    router_norm = new_router_norm(norm, x, residual)
    if paths is not None:
        paths.record(ROUTE_NORM_PATH)
        path = grouped_path(mlp, x)
        if path is not None:
            paths.record(path)
    out = mlp(x, md.slot_mapping != PADDING_SLOT, is_fused=True, norm=router_norm)
    return MoeHalf(hidden=out, stream=x if residual is None else router_norm.stream)
