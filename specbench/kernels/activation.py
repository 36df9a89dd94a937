"""Fused SiLU-and-multiply for the gated MLP: silu(gate) * up in one pass, rounding where the eager ops round.

Eager torch runs two kernels: F.silu (fp32 math, rounded to the input dtype) and the multiply (rounded again).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from specbench.kernels.pdl import launch_overlap, wait_for_inputs
from specbench.kernels.runtime import check_runnable, next_pow2

MAX_BLOCK = 1024


@triton.jit
def _silu_and_mul_kernel(
    gate_up_ptr,  # [num_tokens, 2 * inter]: gate columns, then up columns
    out_ptr,  # [num_tokens, inter]
    inter,
    stride_gate_up, stride_out,
    PRECISE_EXP: tl.constexpr,
    BLOCK: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    token = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    is_col = cols < inter
    row = gate_up_ptr + token * stride_gate_up
    gate = tl.load(row + cols, mask=is_col, other=0.0).to(tl.float32)
    up = tl.load(row + inter + cols, mask=is_col, other=0.0).to(tl.float32)
    # torch's CUDA silu is x / (1 + expf(-x)) in fp32 with IEEE division; tl.exp would be ex2.approx and `/`
    # an approximate divide. libdevice has no interpreter implementation: numpy's exp stands in on CPU.
    if PRECISE_EXP:
        exp_neg = libdevice.exp(-gate)
    else:
        exp_neg = tl.exp(-gate)
    dtype = out_ptr.dtype.element_ty
    silu = tl.math.div_rn(gate, 1.0 + exp_neg).to(dtype).to(tl.float32)  # F.silu's rounding
    # A product of two 16-bit floats is exact in fp32: one rounding, as torch's 16-bit multiply.
    tl.store(out_ptr + token * stride_out + cols, (silu * up).to(dtype), mask=is_col)


def silu_and_mul(
    gate_up: torch.Tensor,  # [..., 2 * inter]: gate, then up (GatedMLP's gate_up_proj output)
) -> torch.Tensor:  # [..., inter] = F.silu(gate) * up, in gate_up's dtype
    check_runnable(_silu_and_mul_kernel, gate_up)
    width = gate_up.shape[-1]
    if width % 2:
        raise ValueError(f"silu_and_mul needs an even last dimension (gate and up halves), got {width}")
    inter = width // 2
    x2 = gate_up.reshape(-1, width)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    out = torch.empty((*gate_up.shape[:-1], inter), dtype=gate_up.dtype, device=gate_up.device)
    out2 = out.view(-1, inter)
    if x2.shape[0] and inter:
        block = min(MAX_BLOCK, next_pow2(inter))
        _silu_and_mul_kernel[(x2.shape[0], triton.cdiv(inter, block))](
            x2, out2, inter, x2.stride(0), out2.stride(0),
            PRECISE_EXP=gate_up.device.type == "cuda",
            BLOCK=block,
            num_warps=max(1, min(4, block // 256)), **launch_overlap(x2),
        )
    return out
