"""Epilogue math shared by the expert kernels (kernels/moe_gemv.py, kernels/moe_cores.py): the roundings of the
eager reference (specbench/models/moe.py) and the gated activations."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def round_to(x, dtype: tl.constexpr):  # fp32 -> the dtype's nearest value, back in fp32
    return x.to(dtype).to(tl.float32)


@triton.jit
def gated_activation(acc_gate, acc_up, swiglu_alpha, swiglu_limit, dtype: tl.constexpr,
                     IS_SWIGLU_OAI: tl.constexpr, PRECISE_EXP: tl.constexpr):
    """The activation of fp32 gate and up sums (biases added), rounded as the eager ops round."""
    gate = round_to(acc_gate, dtype)  # F.linear's output rounding
    up = round_to(acc_up, dtype)
    if IS_SWIGLU_OAI:
        gate = tl.minimum(gate, swiglu_limit)
        up = tl.minimum(tl.maximum(up, -swiglu_limit), swiglu_limit)
        scaled = round_to(gate * swiglu_alpha, dtype)
        # libdevice has no interpreter implementation: numpy's exp stands in on CPU (as kernels/activation.py).
        if PRECISE_EXP:
            exp_neg = libdevice.exp(-scaled)
        else:
            exp_neg = tl.exp(-scaled)
        # torch rounds each op: gate * alpha, sigmoid, gate * sigmoid, up + 1, the product.
        sig = round_to(tl.math.div_rn(1.0, 1.0 + exp_neg), dtype)
        return round_to(up + 1.0, dtype) * round_to(gate * sig, dtype)
    else:
        if PRECISE_EXP:
            exp_neg = libdevice.exp(-gate)
        else:
            exp_neg = tl.exp(-gate)
        # torch's fp32 silu with IEEE division, rounded, then a rounded multiply (kernels/activation.py).
        return round_to(tl.math.div_rn(gate, 1.0 + exp_neg), dtype) * up
