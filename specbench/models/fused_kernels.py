"""The fused Triton kernels in the model layers (RMSNorm, RoPE, SiLU-and-mul, and the decode-batch projections of
`decode_gemv`), and each model's policy for them.

The torch path in `layers.py` stays the reference. The policy (auto | on | off: config.FUSED_KERNEL_POLICIES) is
a value of each model, set when it is built (`set_policy`, from EngineConfig.fused_kernels): a fused production
engine and an unfused reference engine coexist in one process.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from types import ModuleType

import torch
from torch import nn

from specbench.config import FUSED_KERNEL_POLICIES as POLICIES
from specbench.errors import SpecbenchError


class UsesFusedKernels:
    """Declares that a layer may run the fused kernels; `fused_policy` is its model's policy (set_policy)."""

    fused_policy: str = "auto"  # a layer built alone (tests) behaves as an engine's default


def set_policy(model: nn.Module, policy: str) -> None:
    """Every layer of `model` that may run fused kernels takes `policy` from its next forward; CUDA graphs keep the
    path they were captured with."""
    if policy not in POLICIES:
        raise SpecbenchError(f"unknown fused-kernel policy {policy!r}; supported: {', '.join(POLICIES)}")
    for module in model.modules():
        if isinstance(module, UsesFusedKernels):
            module.fused_policy = policy


@dataclass(frozen=True)
class KernelModules:
    rms_norm: ModuleType
    rope: ModuleType
    activation: ModuleType
    gemv: ModuleType
    gemv_rope: ModuleType
    qk_norm_rope: ModuleType


@functools.lru_cache(maxsize=None)
def _kernel_modules() -> KernelModules | None:
    # Imported on first use, never at specbench import: the first `import triton` fixes its TRITON_INTERPRET mode.
    try:
        from specbench.kernels import activation, gemv, gemv_rope, qk_norm_rope, rms_norm, rope
    except ImportError:
        return None
    return KernelModules(rms_norm=rms_norm, rope=rope, activation=activation, gemv=gemv, gemv_rope=gemv_rope,
                         qk_norm_rope=qk_norm_rope)


@functools.lru_cache(maxsize=None)
def _runnable_on(device_type: str) -> bool:
    modules = _kernel_modules()
    if modules is None:
        return False
    from specbench.kernels.runtime import is_interpreted

    return device_type == "cuda" or (device_type == "cpu" and is_interpreted(modules.rms_norm._rms_norm_kernel))


def use_fused(policy: str, x: torch.Tensor) -> bool:
    """Whether a layer with this policy runs the fused kernels on `x`.

    Depends on the policy and x's device type only (never on values): no host sync, and a CUDA graph
    captures one fixed path.
    """
    device_type = x.device.type
    if policy == "off" or (policy == "auto" and device_type != "cuda"):
        return False
    if _runnable_on(device_type):
        return True
    if policy == "on":
        hint = "triton is not importable"
        if _kernel_modules() is not None:
            from specbench.kernels.runtime import CPU_HINT as hint
        raise SpecbenchError(f"fused kernels are on but cannot run on {device_type} tensors; {hint}")
    return False


def rms_norm(
    x: torch.Tensor,  # [..., hidden]
    weight: torch.Tensor,  # [hidden]
    eps: float,
    residual: torch.Tensor | None = None,  # [..., hidden]
    *,
    is_offset: bool = False,  # x / rms(x) * (1 + weight) in fp32 (layers.OffsetRMSNorm)
) -> tuple[torch.Tensor, torch.Tensor | None]:  # (RMSNorm(x [+ residual]) [..., hidden], x + residual or None)
    return _kernel_modules().rms_norm.rms_norm(x, weight, eps, residual, is_offset=is_offset)


def apply_rope_(
    q: torch.Tensor,  # [num_tokens, num_heads, head_dim], rotated in place
    k: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim], rotated in place
    cos_sin: torch.Tensor,  # [num_tokens, 2, head_dim] fp32, each token's own row
) -> None:
    _kernel_modules().rope.apply_rope_(q, k, None, cos_sin)


def silu_and_mul(gate_up: torch.Tensor) -> torch.Tensor:  # [num_tokens, 2 * inter] (gate, up) -> [num_tokens, inter]
    return _kernel_modules().activation.silu_and_mul(gate_up)


def gemv_rope_store(
    x: torch.Tensor,  # [num_tokens, in_size]
    qkv_weight: torch.Tensor,  # [(num_q_heads + 2 * num_kv_heads) * head_dim, in_size], rows q, k, v
    cos_sin: torch.Tensor,  # [num_tokens, 2, head_dim] fp32
    slot_mapping: torch.Tensor,  # [num_tokens] int64
    k_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    num_q_heads: int,
    num_kv_heads: int,
    *,
    norm_weight: torch.Tensor | None = None,  # [in_size]
    eps: float = 0.0,
    norm_split: int = 0,  # > 0: two RMSNorms side by side, over x[:, :norm_split] and x[:, norm_split:]
    bias: torch.Tensor | None = None,  # [(num_q_heads + 2 * num_kv_heads) * head_dim], before RoPE
) -> torch.Tensor:  # [num_tokens, num_q_heads * head_dim]: rotated q; rotated k and v are in the caches
    modules = _kernel_modules()
    rope = modules.gemv_rope.RopeStore(cos_sin, slot_mapping, k_cache, v_cache, num_q_heads, num_kv_heads,
                                       k_cache.shape[-1])
    return modules.gemv.gemv(x, qkv_weight, norm_weight=norm_weight, eps=eps, rope=rope, norm_split=norm_split,
                             bias=bias)


def qk_norm_rope_store(
    qkv: torch.Tensor,  # [num_tokens, (num_q_heads + 2 * num_kv_heads) * head_dim]
    q_norm_weight: torch.Tensor,  # [head_dim]
    k_norm_weight: torch.Tensor,  # [head_dim]
    eps: float,
    cos_sin: torch.Tensor,  # [num_tokens, 2, head_dim] fp32
    slot_mapping: torch.Tensor,  # [num_tokens] int64
    k_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    num_q_heads: int,
    num_kv_heads: int,
    **layout,  # is_q_gated, rotary_dim, is_offset (kernels/qk_norm_rope.py)
) -> torch.Tensor:  # [num_tokens, num_q_heads * head_dim]: normalized, rotated q; k and v are in the caches
    return _kernel_modules().qk_norm_rope.qk_norm_rope_store(
        qkv, q_norm_weight, k_norm_weight, eps, cos_sin, slot_mapping, k_cache, v_cache, num_q_heads, num_kv_heads,
        **layout)


def rope_store_fits(num_tokens: int, head_dim: int) -> bool:
    """Whether `gemv_rope_store` takes these shapes (kernels/gemv_rope.py)."""
    return _kernel_modules().gemv_rope.rope_store_fits(num_tokens, head_dim)


def gemv_max_tokens() -> int:
    """The most tokens `gemv` takes (kernels/gemv.py: past it a projection is no longer a skinny GEMM)."""
    return _kernel_modules().gemv.MAX_TOKENS


def gemv(
    x: torch.Tensor,  # [num_tokens, in_size]
    weight: torch.Tensor,  # [out, in_size]; [gate; up] rows if is_gated
    *,
    norm_weight: torch.Tensor | None = None,  # [in_size]
    eps: float = 0.0,
    is_gated: bool = False,
    residual: torch.Tensor | None = None,  # [num_tokens, out]
    norm_split: int = 0,  # > 0: two RMSNorms side by side, over x[:, :norm_split] and x[:, norm_split:]
    bias: torch.Tensor | None = None,  # [out], not with is_gated
    input_gate=None,  # kernels/gemv.py InputGate (`input_gate` below): project x * sigmoid(gate)
) -> torch.Tensor:  # [num_tokens, out]: [residual +] [silu(gate) * up of] ((RMSNorm(x) | x) @ weight.T [+ bias])
    return _kernel_modules().gemv.gemv(
        x, weight, norm_weight=norm_weight, eps=eps, is_gated=is_gated, residual=residual, norm_split=norm_split,
        bias=bias, input_gate=input_gate,
    )


def input_gate(
    source: torch.Tensor,  # [num_tokens, *]: the gate of x's column c at (c // group) * group_stride + c % group
    group: int,
    group_stride: int,
):  # -> kernels/gemv.py InputGate
    return _kernel_modules().gemv.InputGate(source, group, group_stride)
