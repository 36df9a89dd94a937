"""A Gated DeltaNet layer's uniform verify rows (plain decode: one token a request; a chain verify: k + 1) between its
projections in three launches, the "triton" recurrent kernels (recurrent/kernel_choice.py): the short causal conv
with every position's conv state kept, read straight from the qkvz projection's per-key-head layout; the gated delta
rule with every position's recurrent state kept, its decay and write strength computed from the ba projection; the
gated RMSNorm of the rule's output by z.

The torch forms they replace (recurrent/causal_conv.py, recurrent/gated_delta_rule.py, in GatedDeltaNet's
`_verify_batched`) take ~80 small launches a layer (gathers, transposes, the L2 norms, the rule's per-token ops, the
copies into the kept buffers, the splits of the projections, the gates, the norm); inside a CUDA graph each still
costs a few microseconds, which at one request a step is most of a hybrid target's decode (see
docs/hybrid_targets.md). Rounding follows the torch forms (GatedDeltaNet's): the conv sums in fp32 and rounds to the
model's dtype before and after the SiLU (as conv1d then F.silu do); beta is the sigmoid rounded to the model's dtype;
the rule runs in fp32 and its output is rounded to the model's dtype; the norm rounds where GatedRMSNorm does. Sums
run in another order, so values agree to fp32 accumulation noise.

Neither kernel writes a slot: verify rows keep states for the commit (recurrent/state_cache.py), which picks one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from specbench.kernels.pdl import launch_overlap, wait_for_inputs
from specbench.kernels.runtime import check_runnable, is_interpreted, next_pow2


@dataclass(frozen=True, slots=True)
class DeltaVerifyDims:
    """A Gated DeltaNet layer's head layout (recurrent/config.py GatedDeltaNetConfig's fields). The projections
    interleave per key head: qkvz [q (k_dim) | k (k_dim) | v (group * v_dim) | z (group * v_dim)], ba
    [b (group) | a (group)]; the conv's channels are [q all heads | k all heads | v all heads]."""

    num_k_heads: int
    k_dim: int
    num_v_heads: int
    v_dim: int

    @property
    def group(self) -> int:  # value heads per q/k head
        return self.num_v_heads // self.num_k_heads

    @property
    def key_size(self) -> int:
        return self.num_k_heads * self.k_dim

    @property
    def conv_channels(self) -> int:
        return 2 * self.key_size + self.num_v_heads * self.v_dim

    @property
    def qkvz_per_head(self) -> int:  # Qwen3-Next's qkvz columns per key head
        return 2 * self.k_dim + 2 * self.group * self.v_dim


@dataclass(frozen=True, slots=True)
class DeltaInputs:
    """A layer's input projections as the kernels read them, either checkpoint layout (GatedDeltaNetConfig
    .is_split_projections). Conv channel c of [q | k | v] is column (c // k_dim) * qk_head_stride + c % k_dim of
    `qkv` for q, the same plus k_offset for k (c - key_size), (c' // (group * v_dim)) * v_head_stride + v_offset +
    c' % (group * v_dim) for v (c' = c - 2 * key_size); value head hv's b is column (hv // group) * gate_head_stride
    + hv % group of `b` (a likewise of `a`), its z starts at column (hv // group) * z_head_stride + (hv % group) *
    v_dim of `z`. Qwen3-Next's interleaved qkvz / ba are views with those strides; Qwen3.5's split projections the
    identity."""

    qkv: torch.Tensor  # [n, *] holds q, k, v
    z: torch.Tensor  # [n, *] holds z (a column view of qkv's tensor, or its own)
    b: torch.Tensor  # [n, *]
    a: torch.Tensor  # [n, *]
    qk_head_stride: int
    k_offset: int
    v_head_stride: int
    v_offset: int
    gate_head_stride: int
    z_head_stride: int

    @staticmethod
    def interleaved(qkvz: torch.Tensor, ba: torch.Tensor, dims: DeltaVerifyDims) -> DeltaInputs:
        """Qwen3-Next: per key head qkvz [q | k | v (group) | z (group)], ba [b (group) | a (group)]."""
        per_head, g = dims.qkvz_per_head, dims.group
        return DeltaInputs(qkvz, qkvz[:, 2 * dims.k_dim + g * dims.v_dim:], ba, ba[:, g:], per_head, dims.k_dim,
                           per_head, 2 * dims.k_dim, 2 * g, per_head)

    @staticmethod
    def split(qkv: torch.Tensor, z: torch.Tensor, b: torch.Tensor, a: torch.Tensor,
              dims: DeltaVerifyDims) -> DeltaInputs:
        """Qwen3.5: qkv [q all heads | k all heads | v all heads], z [Hv * Dv], b and a [Hv]."""
        g = dims.group
        return DeltaInputs(qkv, z, b, a, dims.k_dim, dims.key_size, g * dims.v_dim, 2 * dims.key_size, g,
                           g * dims.v_dim)


@triton.jit
def _conv_verify_kernel(
    qkv_ptr,  # [num_reqs * N, *] the projection holding the conv's inputs (DeltaInputs' column map)
    conv_slots_ptr,  # [num_slots, C, W] each request's conv state (the W inputs before its rows)
    slots_ptr,  # [num_reqs] int64
    weight_ptr,  # [C, W + 1]
    conv_out_ptr,  # [num_reqs * N, C] silu(conv), the model's dtype
    kept_ptr,  # [num_reqs * N, C, W] the conv state after each row
    num_channels, key_size, k_dim, group_v, qk_head_stride, k_offset, v_head_stride, v_offset,
    stride_qkv, stride_slot, stride_slot_c, stride_weight, stride_out, stride_kept, stride_kept_c,
    N: tl.constexpr,
    W: tl.constexpr,
    BLOCK_C: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    r = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    is_c = c < num_channels
    # channel c of [q | k | v] -> its column of the projection: q and k by key head, v by key head's value heads
    ck = c - key_size
    cv = c - 2 * key_size
    col = tl.where(c < key_size, (c // k_dim) * qk_head_stride + c % k_dim,
                   tl.where(ck < key_size, (ck // k_dim) * qk_head_stride + k_offset + ck % k_dim,
                            (cv // group_v) * v_head_stride + v_offset + cv % group_v))
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
                x = tl.load(qkv_ptr + (row0 + t + j - W) * stride_qkv + col, mask=is_c, other=0.0)
            x = x.to(qkv_ptr.dtype.element_ty).to(tl.float32)  # the state joins the rows in their dtype
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
                x = tl.load(qkv_ptr + (row0 + t + 1 + j - W) * stride_qkv + col, mask=is_c, other=0.0)
            x = x.to(qkv_ptr.dtype.element_ty)
            tl.store(kept_ptr + (row0 + t) * stride_kept + c * stride_kept_c + j, x.to(kept_ptr.dtype.element_ty),
                     mask=is_c)


@triton.jit
def _rule_verify_kernel(
    conv_out_ptr,  # [num_reqs * N, C]: q (Hk * Dk) | k (Hk * Dk) | v (Hv * Dv) channels
    b_ptr,  # [num_reqs * N, *] write strengths before the sigmoid (DeltaInputs' column map)
    a_ptr,  # [num_reqs * N, *] decay inputs
    a_log_ptr,  # [Hv] log of the decay rate
    dt_bias_ptr,  # [Hv]
    rec_slots_ptr,  # [num_slots, Hv, Dk, Dv] fp32
    slots_ptr,  # [num_reqs] int64
    out_ptr,  # [num_reqs * N, Hv, Dv]
    kept_ptr,  # [num_reqs * N, Hv, Dk, Dv] fp32 the state after each row
    key_size, num_v_heads, group, k_dim, v_dim, scale, gate_head_stride,
    stride_conv, stride_b, stride_a, stride_slot, stride_out, stride_kept,
    N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_V: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    pid = tl.program_id(0).to(tl.int64)
    r = pid // num_v_heads
    hv = pid % num_v_heads
    hk = hv // group  # each q/k head serves `group` consecutive value heads
    gate_col = hk * gate_head_stride + hv % group
    neg_rate = -tl.exp(tl.load(a_log_ptr + hv).to(tl.float32))
    dt_bias = tl.load(dt_bias_ptr + hv).to(tl.float32)
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
        # beta = sigmoid(b) in the model's dtype; g = -exp(A_log) * softplus(a + dt_bias) (torch's threshold 20)
        b = tl.load(b_ptr + row * stride_b + gate_col).to(tl.float32)
        b = (1.0 / (1.0 + tl.exp(-b))).to(b_ptr.dtype.element_ty).to(tl.float32)
        a = tl.load(a_ptr + row * stride_a + gate_col).to(tl.float32) + dt_bias
        e = tl.exp(tl.minimum(a, 20.0))
        softplus = tl.where(a > 20.0, a, tl.where(e < 1e-4, e - 0.5 * e * e, tl.log(1.0 + e)))  # log1p's accuracy
        g = neg_rate * softplus
        state = state * tl.exp(g)
        remembered = tl.sum(state * k[:, None], 0)  # [BLOCK_V] what the state recalls under the key
        delta = (v - remembered) * b
        state = state + k[:, None] * delta[None, :]
        o = tl.sum(state * q[:, None], 0)
        tl.store(out_ptr + row * stride_out + hv * v_dim + vs, o.to(out_ptr.dtype.element_ty), mask=is_v)
        tl.store(kept_ptr + row * stride_kept + head + tile, state, mask=is_tile)


@triton.jit
def _gated_norm_kernel(
    core_ptr,  # [num_rows, Hv, Dv] the rule's output, the model's dtype
    z_ptr,  # [num_rows, *] the gates (DeltaInputs' column map)
    weight_ptr,  # [Dv]
    out_ptr,  # [num_rows, Hv * Dv]
    num_v_heads, group, v_dim, z_head_stride, eps,
    stride_core, stride_z, stride_out,
    BLOCK_V: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    pid = tl.program_id(0).to(tl.int64)
    row = pid // num_v_heads
    hv = pid % num_v_heads
    vs = tl.arange(0, BLOCK_V)
    is_v = vs < v_dim
    x = tl.load(core_ptr + row * stride_core + hv * v_dim + vs, mask=is_v, other=0.0).to(tl.float32)
    inv_rms = tl.math.rsqrt(tl.sum(x * x, 0) / v_dim + eps)
    normed = (x * inv_rms).to(out_ptr.dtype.element_ty)
    weight = tl.load(weight_ptr + vs, mask=is_v, other=0.0).to(out_ptr.dtype.element_ty)
    scaled = (weight * normed).to(out_ptr.dtype.element_ty).to(tl.float32)  # weight * normed in the model's dtype
    z_col = (hv // group) * z_head_stride + (hv % group) * v_dim
    z = tl.load(z_ptr + row * stride_z + z_col + vs, mask=is_v, other=0.0).to(tl.float32)
    gated = scaled * (z / (1.0 + tl.exp(-z)))
    tl.store(out_ptr + row * stride_out + hv * v_dim + vs, gated.to(out_ptr.dtype.element_ty), mask=is_v)


def _check_layouts(**tensors: torch.Tensor) -> None:
    for name, t in tensors.items():
        if t.stride(-1) != 1:
            raise ValueError(f"gated_delta_verify: {name} must have unit last stride, got {t.stride()}")


def gated_delta_verify(
    inputs: DeltaInputs,  # the input projections of num_reqs * n request-major rows
    a_log: torch.Tensor,  # [Hv]
    dt_bias: torch.Tensor,  # [Hv]
    conv_slots: torch.Tensor,  # [num_slots, C, W] this layer's conv states
    rec_slots: torch.Tensor,  # [num_slots, Hv, Dk, Dv] fp32 this layer's recurrent states
    slots: torch.Tensor,  # [num_reqs] int64 each request's slot
    conv_weight: torch.Tensor,  # [C, W + 1]
    dims: DeltaVerifyDims,
    core: torch.Tensor,  # [num_reqs * n, Hv, Dv] written: the rule's output in the model's dtype
    kept_conv: torch.Tensor,  # [num_reqs * n, C, W] written: the conv state after each row
    kept_rec: torch.Tensor,  # [num_reqs * n, Hv, Dk, Dv] fp32 written: the recurrent state after each row
) -> None:
    """Every request a verify row of n = rows / num_reqs tokens: the rule's outputs and every position's states."""
    qkv = inputs.qkv
    check_runnable(_rule_verify_kernel, qkv)
    num_reqs = slots.shape[0]
    num_rows = qkv.shape[0]
    if num_reqs == 0 or num_rows == 0:
        return
    n = num_rows // num_reqs
    width = conv_slots.shape[2]
    _check_layouts(qkv=qkv, b=inputs.b, a=inputs.a, conv_slots=conv_slots, weight=conv_weight, core=core,
                   kept_conv=kept_conv)
    for name, t in (("recurrent slots", rec_slots), ("kept recurrent", kept_rec)):
        if t.dtype != torch.float32 or not t[0].is_contiguous():
            raise ValueError(f"gated_delta_verify: {name} must be fp32 with contiguous rows")
    num_channels = dims.conv_channels
    conv_out = torch.empty(num_rows, num_channels, dtype=qkv.dtype, device=qkv.device)
    block_c = min(256, next_pow2(num_channels))
    _conv_verify_kernel[(num_reqs, triton.cdiv(num_channels, block_c))](
        qkv, conv_slots, slots, conv_weight, conv_out, kept_conv,
        num_channels, dims.key_size, dims.k_dim, dims.group * dims.v_dim, inputs.qk_head_stride, inputs.k_offset,
        inputs.v_head_stride, inputs.v_offset,
        qkv.stride(0), conv_slots.stride(0), conv_slots.stride(1), conv_weight.stride(0), conv_out.stride(0),
        kept_conv.stride(0), kept_conv.stride(1),
        N=n, W=width, BLOCK_C=block_c, **launch_overlap(qkv),
    )
    # narrower value tiles when few requests run: more programs to spread over the SMs (one request x 32 heads x
    # 128 values: 128 programs of 32 columns rather than 64 of 64)
    block_v = min(32 if num_reqs * dims.num_v_heads < 128 else 64, next_pow2(dims.v_dim))
    core2 = core.view(num_rows, -1)
    _rule_verify_kernel[(num_reqs * dims.num_v_heads, triton.cdiv(dims.v_dim, block_v))](
        conv_out, inputs.b, inputs.a, a_log, dt_bias, rec_slots, slots, core2, kept_rec,
        dims.key_size, dims.num_v_heads, dims.group, dims.k_dim, dims.v_dim, dims.k_dim ** -0.5,
        inputs.gate_head_stride,
        conv_out.stride(0), inputs.b.stride(0), inputs.a.stride(0), rec_slots.stride(0), core2.stride(0),
        kept_rec.stride(0),
        N=n, BLOCK_K=next_pow2(dims.k_dim), BLOCK_V=block_v,
        num_warps=4, **launch_overlap(conv_out),
    )


def gated_rms_norm(
    core: torch.Tensor,  # [num_rows, Hv, Dv] the rule's output
    inputs: DeltaInputs,  # its z gates
    weight: torch.Tensor,  # [Dv]
    eps: float,
    dims: DeltaVerifyDims,
) -> torch.Tensor:  # [num_rows, Hv * Dv] in core's dtype
    """GatedRMSNorm (recurrent/gated_delta_net.py) of each head's output, gated by silu(z), one launch."""
    check_runnable(_gated_norm_kernel, core)
    num_rows = core.shape[0]
    out = torch.empty(num_rows, dims.num_v_heads * dims.v_dim, dtype=core.dtype, device=core.device)
    if num_rows == 0:
        return out
    z = inputs.z
    _check_layouts(core=core, z=z)
    core2 = core.view(num_rows, -1)
    _gated_norm_kernel[(num_rows * dims.num_v_heads,)](
        core2, z, weight, out, dims.num_v_heads, dims.group, dims.v_dim, inputs.z_head_stride, eps,
        core2.stride(0), z.stride(0), out.stride(0),
        BLOCK_V=next_pow2(dims.v_dim), **launch_overlap(core2),
    )
    return out


def runs_interpreted() -> bool:
    """These kernels were decorated under TRITON_INTERPRET=1 (the CPU test processes): they run on CPU tensors."""
    return is_interpreted(_rule_verify_kernel)
