"""A Gated DeltaNet layer's uniform verify rows (plain decode: one token a request; a chain verify: k + 1) in two
launches, the "triton" recurrent kernels (recurrent/kernel_choice.py): the short causal conv with every position's
conv state kept, then the gated delta rule with every position's recurrent state kept, both from the requests' slots.

The torch forms they replace (recurrent/causal_conv.py, recurrent/gated_delta_rule.py, in GatedDeltaNet's
`_verify_batched`) take ~80 small launches a layer (gathers, transposes, the L2 norms, the rule's per-token ops, the
copies into the kept buffers); inside a CUDA graph each still costs a few microseconds, which at one request a step
is most of a hybrid target's decode (see docs/hybrid_targets.md). Rounding follows the torch forms: the conv sums in
fp32 and rounds to the model's dtype before and after the SiLU (as conv1d then F.silu do), the rule runs in fp32 and
its output is rounded to the model's dtype; sums run in another order, so values agree to fp32 accumulation noise.

Neither kernel writes a slot: verify rows keep states for the commit (recurrent/state_cache.py), which picks one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from specbench.kernels.runtime import check_runnable, next_pow2


@dataclass(frozen=True, slots=True)
class DeltaVerifyDims:
    """A Gated DeltaNet layer's head layout (recurrent/config.py GatedDeltaNetConfig's fields)."""

    num_k_heads: int
    k_dim: int
    num_v_heads: int
    v_dim: int

    @property
    def key_size(self) -> int:
        return self.num_k_heads * self.k_dim

    @property
    def conv_channels(self) -> int:  # [q | k | v] channels in the conv's order
        return 2 * self.key_size + self.num_v_heads * self.v_dim


@triton.jit
def _conv_verify_kernel(
    mixed_ptr,  # [num_reqs * N, C] the conv's inputs, request-major rows
    conv_slots_ptr,  # [num_slots, C, W] each request's conv state (the W inputs before its rows)
    slots_ptr,  # [num_reqs] int64
    weight_ptr,  # [C, W + 1]
    conv_out_ptr,  # [num_reqs * N, C] silu(conv), the model's dtype
    kept_ptr,  # [num_reqs * N, C, W] the conv state after each row
    num_channels,
    stride_mixed, stride_slot, stride_slot_c, stride_weight, stride_out, stride_kept, stride_kept_c,
    N: tl.constexpr,
    W: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    r = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    is_c = c < num_channels
    slot = tl.load(slots_ptr + r)
    state_base = conv_slots_ptr + slot * stride_slot + c * stride_slot_c
    row0 = r * N
    for t in tl.static_range(N):
        acc = tl.zeros([BLOCK_C], dtype=tl.float32)
        for j in tl.static_range(W + 1):
            # input i = t + j of the window [state (W columns) | rows]: a state column or an earlier row of ours
            if t + j < W:
                x = tl.load(state_base + (t + j), mask=is_c, other=0.0)
            else:
                x = tl.load(mixed_ptr + (row0 + t + j - W) * stride_mixed + c, mask=is_c, other=0.0)
            x = x.to(mixed_ptr.dtype.element_ty).to(tl.float32)  # the state joins the rows in their dtype
            w = tl.load(weight_ptr + c * stride_weight + j, mask=is_c, other=0.0).to(tl.float32)
            acc += w * x
        pre = acc.to(conv_out_ptr.dtype.element_ty).to(tl.float32)  # conv1d's output dtype, then F.silu
        out = pre / (1.0 + tl.exp(-pre))
        tl.store(conv_out_ptr + (row0 + t) * stride_out + c, out.to(conv_out_ptr.dtype.element_ty), mask=is_c)
        for j in tl.static_range(W):
            # the state after row t holds inputs t + 1 .. t + W of the window
            if t + 1 + j < W:
                x = tl.load(state_base + (t + 1 + j), mask=is_c, other=0.0)
            else:
                x = tl.load(mixed_ptr + (row0 + t + 1 + j - W) * stride_mixed + c, mask=is_c, other=0.0)
            x = x.to(mixed_ptr.dtype.element_ty)
            tl.store(kept_ptr + (row0 + t) * stride_kept + c * stride_kept_c + j, x.to(kept_ptr.dtype.element_ty),
                     mask=is_c)


@triton.jit
def _rule_verify_kernel(
    conv_out_ptr,  # [num_reqs * N, C]: q (Hk * Dk) | k (Hk * Dk) | v (Hv * Dv) channels
    log_decay_ptr,  # [num_reqs * N, Hv] fp32
    beta_ptr,  # [num_reqs * N, Hv]
    rec_slots_ptr,  # [num_slots, Hv, Dk, Dv] fp32
    slots_ptr,  # [num_reqs] int64
    out_ptr,  # [num_reqs * N, Hv, Dv]
    kept_ptr,  # [num_reqs * N, Hv, Dk, Dv] fp32 the state after each row
    key_size, num_v_heads, group, k_dim, v_dim, scale,
    stride_conv, stride_decay, stride_beta, stride_slot, stride_out, stride_kept,
    N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    r = pid // num_v_heads
    hv = pid % num_v_heads
    hk = hv // group  # each q/k head serves `group` consecutive value heads
    ks = tl.arange(0, BLOCK_K)
    vs = tl.program_id(1) * BLOCK_V + tl.arange(0, BLOCK_V)
    is_k, is_v = ks < k_dim, vs < v_dim
    tile = ks[:, None] * v_dim + vs[None, :]  # [BLOCK_K, BLOCK_V] offsets in one head's [Dk, Dv] state
    is_tile = is_k[:, None] & is_v[None, :]
    slot = tl.load(slots_ptr + r)
    head = hv * k_dim * v_dim
    state = tl.load(rec_slots_ptr + slot * stride_slot + head + tile, mask=is_tile, other=0.0)
    for t in tl.static_range(N):
        row = r * N + t
        q = tl.load(conv_out_ptr + row * stride_conv + hk * k_dim + ks, mask=is_k, other=0.0).to(tl.float32)
        k = tl.load(conv_out_ptr + row * stride_conv + key_size + hk * k_dim + ks, mask=is_k,
                    other=0.0).to(tl.float32)
        v = tl.load(conv_out_ptr + row * stride_conv + 2 * key_size + hv * v_dim + vs, mask=is_v,
                    other=0.0).to(tl.float32)
        # L2 norms as the reference: x * rsqrt(sum(x^2) + 1e-6); q also times k_dim^-0.5
        q = q * tl.math.rsqrt(tl.sum(q * q, 0) + 1e-6) * scale
        k = k * tl.math.rsqrt(tl.sum(k * k, 0) + 1e-6)
        g = tl.load(log_decay_ptr + row * stride_decay + hv).to(tl.float32)
        b = tl.load(beta_ptr + row * stride_beta + hv).to(tl.float32)
        state = state * tl.exp(g)
        remembered = tl.sum(state * k[:, None], 0)  # [BLOCK_V] what the state recalls under the key
        delta = (v - remembered) * b
        state = state + k[:, None] * delta[None, :]
        o = tl.sum(state * q[:, None], 0)
        tl.store(out_ptr + row * stride_out + hv * v_dim + vs, o.to(out_ptr.dtype.element_ty), mask=is_v)
        tl.store(kept_ptr + row * stride_kept + head + tile, state, mask=is_tile)


def gated_delta_verify(
    mixed: torch.Tensor,  # [num_reqs * n, C] the conv's inputs (q | k | v projections), request-major rows
    conv_slots: torch.Tensor,  # [num_slots, C, W] this layer's conv states
    rec_slots: torch.Tensor,  # [num_slots, Hv, Dk, Dv] fp32 this layer's recurrent states
    slots: torch.Tensor,  # [num_reqs] int64 each request's slot
    conv_weight: torch.Tensor,  # [C, W + 1]
    log_decay: torch.Tensor,  # [num_reqs * n, Hv] fp32
    beta: torch.Tensor,  # [num_reqs * n, Hv]
    dims: DeltaVerifyDims,
    out: torch.Tensor,  # [num_reqs * n, Hv, Dv] written: the rule's output in its dtype
    kept_conv: torch.Tensor,  # [num_reqs * n, C, W] written: the conv state after each row
    kept_rec: torch.Tensor,  # [num_reqs * n, Hv, Dk, Dv] fp32 written: the recurrent state after each row
) -> None:
    """Every request a verify row of n = mixed rows / num_reqs tokens: outputs and every position's states."""
    check_runnable(_rule_verify_kernel, mixed)
    num_reqs = slots.shape[0]
    num_rows, num_channels = mixed.shape
    if num_reqs == 0 or num_rows == 0:
        return
    n = num_rows // num_reqs
    width = conv_slots.shape[2]
    for name, t in (("mixed", mixed), ("conv slots", conv_slots), ("recurrent slots", rec_slots),
                    ("weight", conv_weight), ("out", out), ("kept conv", kept_conv), ("kept recurrent", kept_rec)):
        if t.stride(-1) != 1:
            raise ValueError(f"gated_delta_verify: {name} must have unit last stride, got {t.stride()}")
    if rec_slots.dtype != torch.float32 or kept_rec.dtype != torch.float32:
        raise ValueError("gated_delta_verify: recurrent states are fp32")
    conv_out = torch.empty_like(mixed)
    block_c = min(256, next_pow2(num_channels))
    _conv_verify_kernel[(num_reqs, triton.cdiv(num_channels, block_c))](
        mixed, conv_slots, slots, conv_weight, conv_out, kept_conv, num_channels,
        mixed.stride(0), conv_slots.stride(0), conv_slots.stride(1), conv_weight.stride(0), conv_out.stride(0),
        kept_conv.stride(0), kept_conv.stride(1),
        N=n, W=width, BLOCK_C=block_c,
    )
    block_k = next_pow2(dims.k_dim)
    block_v = min(64, next_pow2(dims.v_dim))
    out2 = out.view(num_rows, -1)
    _rule_verify_kernel[(num_reqs * dims.num_v_heads, triton.cdiv(dims.v_dim, block_v))](
        conv_out, log_decay, beta, rec_slots, slots, out2, kept_rec,
        dims.key_size, dims.num_v_heads, dims.num_v_heads // dims.num_k_heads, dims.k_dim, dims.v_dim,
        dims.k_dim ** -0.5,
        conv_out.stride(0), log_decay.stride(0), beta.stride(0), rec_slots.stride(0), out2.stride(0),
        kept_rec.stride(0),
        N=n, BLOCK_K=block_k, BLOCK_V=block_v,
        num_warps=4,
    )
