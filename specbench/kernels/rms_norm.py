"""Fused RMSNorm, optionally after the residual add, one pass per row, rounding where the eager layers round.

Two weightings, as the eager layers (models/layers.py): Llama's rounds the normalised row to the input dtype and
multiplies by the weight there; the offset form (Gemma, Qwen3-Next: `is_offset`) multiplies the fp32 row by
(1 + weight) in fp32 and rounds once.

H200 bf16 hidden 4096 (graph replay): 1 row 6.2 us vs 19.6 us for the ~9 eager launches; 4096 rows 39 vs 261 us.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from specbench.kernels.pdl import launch_overlap, wait_for_inputs
from specbench.kernels.runtime import check_runnable, next_pow2


@triton.jit
def _rms_norm_kernel(
    x_ptr,  # [num_rows, hidden]
    residual_ptr,  # [num_rows, hidden] (HAS_RESIDUAL only)
    weight_ptr,  # [hidden]
    out_ptr,  # [num_rows, hidden]
    residual_out_ptr,  # [num_rows, hidden]: x + residual (HAS_RESIDUAL only; may alias residual)
    hidden,
    eps,
    stride_x, stride_residual, stride_out, stride_residual_out,
    HAS_RESIDUAL: tl.constexpr,
    IS_OFFSET: tl.constexpr,  # x / rms(x) * (1 + weight), all fp32, rounded once
    BLOCK: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    is_col = cols < hidden
    x = tl.load(x_ptr + row * stride_x + cols, mask=is_col, other=0.0)
    if HAS_RESIDUAL:
        residual = tl.load(residual_ptr + row * stride_residual + cols, mask=is_col, other=0.0)
        x = (x.to(tl.float32) + residual.to(tl.float32)).to(x_ptr.dtype.element_ty)
        tl.store(residual_out_ptr + row * stride_residual_out + cols, x, mask=is_col)
    x32 = x.to(tl.float32)
    inv_rms = tl.math.rsqrt(tl.math.div_rn(tl.sum(x32 * x32, 0), hidden * 1.0) + eps)
    weight = tl.load(weight_ptr + cols, mask=is_col, other=0.0).to(tl.float32)
    if IS_OFFSET:
        normed = x32 * inv_rms
        weight = 1.0 + weight
    else:
        normed = (x32 * inv_rms).to(x_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + row * stride_out + cols, (weight * normed).to(out_ptr.dtype.element_ty), mask=is_col)


def rms_norm(
    x: torch.Tensor,  # [..., hidden]
    weight: torch.Tensor,  # [hidden]
    eps: float,
    residual: torch.Tensor | None = None,  # [..., hidden]
    *,
    residual_out: torch.Tensor | None = None,  # [..., hidden]; may be `residual` itself (in-place add)
    is_offset: bool = False,  # the (1 + weight) form in fp32 (layers.OffsetRMSNorm) instead of Llama's
) -> tuple[torch.Tensor, torch.Tensor | None]:  # (normalized [..., hidden] in x's dtype, x + residual or None)
    """RMSNorm(x) or, with `residual`, (RMSNorm(x + residual), x + residual)."""
    check_runnable(_rms_norm_kernel, x)
    hidden = x.shape[-1]
    x2 = x.reshape(-1, hidden)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    out = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    res2 = res_out2 = out  # placeholders the kernel never touches without HAS_RESIDUAL
    if residual is not None:
        res2 = residual.reshape(-1, hidden)
        if residual_out is None:
            residual_out = torch.empty_like(x)
        res_out2 = residual_out.view(-1, hidden)
    if x2.shape[0]:
        _rms_norm_kernel[(x2.shape[0],)](
            x2, res2, weight, out, res_out2, hidden, eps,
            x2.stride(0), res2.stride(0), out.stride(0), res_out2.stride(0),
            HAS_RESIDUAL=residual is not None,
            IS_OFFSET=is_offset,
            BLOCK=next_pow2(hidden),
            num_warps=min(16, max(1, next_pow2(hidden) // 512)), **launch_overlap(x2),
        )
    return out.view(x.shape), residual_out
