"""Decode projections for 1 to 64 tokens: one weight pass per tile of output features, with neighbours fused in.

A decode step at small batch reads each weight matrix once and does almost no math, so what costs is the small
kernels around the GEMMs (RMSNorm, SiLU-and-mul, cuBLAS's split-K reduce) and the gaps between them. Here one
kernel does `[residual +] [silu(gate) * up of] ((RMSNorm(x) | x) @ weight.T [+ bias])`, rounding where the eager
layers round (the norm's output, the projection's output, the activation, the residual sum; a bias is added to the
fp32 sum before the projection's rounding, as cuBLAS's bias epilogue does), so it differs from the eager chain only
by the GEMM's fp32 summation order.

A program owns BLOCK_N output features for all tokens at a time and walks the whole input width, so no partial
sums leave it (no split-K reduce). At one token it multiplies on the CUDA cores; from two, on the tensor cores
with the weight rows as the MMA's M side (a skinny GEMM with the operands swapped). With a norm, a first pass
over the tokens' rows (from L2) gives the RMS and the normalized row is rebuilt per K block: cheap on the CUDA
cores, but in the tensor-core loop it costs more than a separate norm kernel (BENCHMARKS.md), so the layers
fuse the norm at one token only. qkv can also rotate q and k and store k and v itself (`rope`, kernels/gemv_rope.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from specbench.kernels.gemv_rope import RopeStore, check_rope, rope_store_epilogue
from specbench.kernels.pdl import launch_overlap, wait_for_inputs
from specbench.kernels.runtime import check_runnable, is_interpreted, next_pow2, slot_strides, sm_count

# The dot mode pads the tokens to a power of two; past 64 a projection is no longer a skinny GEMM.
MAX_TOKENS = 64
RMS_ELEMENTS = 8192  # x elements per load of the RMS pass: 64 registers a thread at 4 warps


@dataclass(frozen=True)
class InputGate:
    """x's columns times the sigmoid of a gate, before the projection, rounded as the eager `x * torch.sigmoid(gate)`
    rounds (Qwen3-Next's gated attention output into o_proj): column c of a token by the sigmoid of
    source[token, (c // group) * group_stride + c % group]."""

    source: torch.Tensor  # [num_tokens, >= the last gate's column + 1], its last dim contiguous (a view is fine)
    group: int  # x columns per group (a head's head_dim)
    group_stride: int  # source columns from one group's gates to the next's


@dataclass(frozen=True)
class GemvConfig:
    block_n: int  # output features per program
    block_k: int  # input width per step of the weight walk
    num_warps: int
    # Tensor-core tl.dot with the weight rows as the MMA's M side and the tokens (padded to 16) as its N side,
    # instead of a multiply-sum on the CUDA cores, one token at a time.
    is_dot: bool
    num_stages: int = 3  # software-pipelined weight loads in flight (dot mode)
    # Persistent: this many programs per SM walk the tiles (0: one program per tile). With `is_flat` the weight
    # pipeline runs on across a program's tiles instead of draining at each.
    programs_per_sm: int = 0
    is_flat: bool = False


def default_config(
    num_tokens: int, in_size: int, has_norm: bool, is_gated: bool, has_residual: bool, element_size: int = 2
) -> GemvConfig:
    """Tiles from `scripts/bench_decode_layer.py --sweep` on an H100 (Llama-3.1-8B shapes, BENCHMARKS.md)."""
    config = _default_16bit_config(num_tokens, in_size, has_norm, is_gated, has_residual)
    if config.is_dot and element_size > 2:
        # The same shared memory for the pipelined tiles (fp32 runs are for checking, not speed).
        return replace(config, block_k=config.block_k * 2 // element_size)
    return config


def _default_16bit_config(
    num_tokens: int, in_size: int, has_norm: bool, is_gated: bool, has_residual: bool
) -> GemvConfig:
    if num_tokens == 1:
        block_k = min(2048, next_pow2(in_size))
        if has_norm and not is_gated:
            # Every program re-reads the row for the RMS: taller programs pay that pass fewer times (qkv: 20.4 us).
            return GemvConfig(block_n=8, block_k=block_k, num_warps=4, is_dot=False)
        # o_proj 13.1, gate_up 78.4, down 40.5 us: 85-99% of copy bandwidth.
        return GemvConfig(block_n=2, block_k=block_k, num_warps=8, is_dot=False)
    # From two tokens the CUDA cores become the bound (each weight is multiplied once per token): tensor cores.
    if is_gated:
        return GemvConfig(block_n=64, block_k=128, num_warps=4, is_dot=True, num_stages=4)  # 81.4 / 86.6 us
    if num_tokens <= 16:
        if has_residual:
            return GemvConfig(block_n=32, block_k=512, num_warps=4, is_dot=True)  # o_proj 14.7, down 43.0 us
        return GemvConfig(block_n=64, block_k=256, num_warps=4, is_dot=True)  # qkv 20.2 us
    if has_residual:
        # o_proj 15.8, down 45.5 us at 64 tokens against 17.4 / 52.7 for one program per tile.
        return GemvConfig(block_n=32, block_k=256, num_warps=4, is_dot=True, num_stages=5, programs_per_sm=1,
                          is_flat=True)
    return GemvConfig(block_n=64, block_k=128, num_warps=4, is_dot=True, num_stages=4)  # qkv 21.8 us


@triton.jit
def _gated_input(x, gate_ptrs, mask, PRECISE_EXP: tl.constexpr):
    """x * sigmoid(gate), as torch rounds: the sigmoid to x's dtype (fp32 with IEEE division), then the product."""
    dtype = x.dtype
    gate = tl.load(gate_ptrs, mask=mask, other=0.0).to(tl.float32)
    if PRECISE_EXP:
        exp_neg = libdevice.exp(-gate)
    else:
        exp_neg = tl.exp(-gate)
    sigmoid = tl.math.div_rn(1.0, 1.0 + exp_neg).to(dtype).to(tl.float32)
    return (x.to(tl.float32) * sigmoid).to(dtype)


@triton.jit
def _gemv_kernel(
    x_ptr,  # [num_tokens, in_size]
    weight_ptr,  # [out_features, in_size], or [2 * out_features, in_size] (gate rows, then up rows) if IS_GATED
    norm_weight_ptr,  # [in_size] (HAS_NORM only)
    residual_ptr,  # [num_tokens, out_features] (HAS_RESIDUAL only)
    bias_ptr,  # [out_features] (HAS_BIAS only; not with IS_GATED)
    out_ptr,  # [num_tokens, out_features]; [num_tokens, NUM_Q_HEADS * HEAD_DIM] (q alone) if HAS_ROPE
    cos_sin_ptr,  # [num_tokens, 2, HEAD_DIM] fp32, each token's cos row then sin row (HAS_ROPE only)
    slot_mapping_ptr,  # [num_tokens] int64, negative = padding (HAS_ROPE only)
    k_cache_ptr,  # [num_slots, NUM_KV_HEADS, HEAD_DIM] (HAS_ROPE only)
    v_cache_ptr,  # [num_slots, NUM_KV_HEADS, HEAD_DIM] (HAS_ROPE only)
    gate_ptr,  # InputGate.source (HAS_INPUT_GATE only)
    num_tokens, out_features, eps,
    stride_x, stride_residual, stride_out, stride_gate,
    stride_cs_token, stride_cs_kind, stride_kc_slot, stride_kc_head, stride_vc_slot, stride_vc_head,
    IN_SIZE: tl.constexpr,
    HAS_NORM: tl.constexpr,
    IS_GATED: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    PRECISE_EXP: tl.constexpr,
    IS_DOT: tl.constexpr,
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 inputs: the eager fp32 GEMM does not round to TF32
    IS_DOT_UPCAST: tl.constexpr,  # the CPU interpreter's bf16 dot returns garbage; fp32 sums the same products
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    RMS_BLOCK: tl.constexpr,  # input width per load of the RMS pass
    # With HAS_NORM: > 0 takes the RMS over columns [0, NORM_SPLIT) and [NORM_SPLIT, IN_SIZE) apart (two RMSNorms
    # side by side: EAGLE-3's and MTP's [embedding, hidden] input); 0 over the whole row.
    NORM_SPLIT: tl.constexpr,
    FLATTEN: tl.constexpr,  # pipeline the weight loads across a program's tiles
    # qkv with RoPE and the K/V store in the epilogue: a tile is BLOCK_N dims of a head's first half and their
    # rotation partners HEAD_DIM / 2 rows below (the second weight tile, as up is to gate).
    HAS_ROPE: tl.constexpr,
    NUM_Q_HEADS: tl.constexpr,
    NUM_KV_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    HAS_INPUT_GATE: tl.constexpr,  # InputGate: x * sigmoid(gate) is projected (not with HAS_NORM)
    GATE_GROUP: tl.constexpr,
    GATE_GROUP_STRIDE: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    in_size = IN_SIZE
    tokens = tl.arange(0, BLOCK_M)
    is_token = tokens < num_tokens
    dtype = out_ptr.dtype.element_ty
    x_rows = x_ptr + tokens.to(tl.int64)[:, None] * stride_x
    inv_rms = tl.zeros([BLOCK_M], dtype=tl.float32)
    inv_rms_2 = tl.zeros([BLOCK_M], dtype=tl.float32)  # the second group's (NORM_SPLIT > 0)
    if HAS_NORM:
        sum_sq = tl.zeros([BLOCK_M], dtype=tl.float32)
        sum_sq_2 = tl.zeros([BLOCK_M], dtype=tl.float32)
        # Unrolled, wide loads; on the H100 no faster than a loop of BLOCK_K-wide ones (151.0 vs 150.9 us a block).
        for rms_k0 in tl.static_range(0, IN_SIZE, RMS_BLOCK):
            rms_ks = rms_k0 + tl.arange(0, RMS_BLOCK)
            rms_x = tl.load(x_rows + rms_ks[None, :], mask=is_token[:, None] & (rms_ks < in_size)[None, :],
                            other=0.0).to(tl.float32)
            if NORM_SPLIT > 0:
                is_first = (rms_ks < NORM_SPLIT)[None, :]
                sum_sq += tl.sum(tl.where(is_first, rms_x * rms_x, 0.0), axis=1)
                sum_sq_2 += tl.sum(tl.where(is_first, 0.0, rms_x * rms_x), axis=1)
            else:
                sum_sq += tl.sum(rms_x * rms_x, axis=1)
        if NORM_SPLIT > 0:
            inv_rms = tl.math.rsqrt(tl.math.div_rn(sum_sq, NORM_SPLIT * 1.0) + eps)
            inv_rms_2 = tl.math.rsqrt(tl.math.div_rn(sum_sq_2, (in_size - NORM_SPLIT) * 1.0) + eps)
        else:
            inv_rms = tl.math.rsqrt(tl.math.div_rn(sum_sq, in_size * 1.0) + eps)
    IS_PAIRED: tl.constexpr = IS_GATED or HAS_ROPE  # two weight tiles a step: (gate, up) or (first, second half)
    HALF: tl.constexpr = HEAD_DIM // 2
    if HAS_ROPE:
        num_tiles = tl.cdiv(out_features, 2 * BLOCK_N)
        pair_offset = HALF * in_size
    else:
        num_tiles = tl.cdiv(out_features, BLOCK_N)
        pair_offset = out_features * in_size
    # Programs own tiles pid, pid + num_programs, ...: with fewer programs than tiles (persistent), the RMS pass
    # is paid once per program instead of once per tile.
    for tile in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), flatten=FLATTEN):
        if HAS_ROPE:
            head = tile // (HALF // BLOCK_N)
            dims = (tile % (HALF // BLOCK_N)) * BLOCK_N + tl.arange(0, BLOCK_N)  # first-half dims of the head
            cols = head * HEAD_DIM + dims
        else:
            cols = tile * BLOCK_N + tl.arange(0, BLOCK_N)
        is_col = cols < out_features
        w_rows = weight_ptr + cols.to(tl.int64)[:, None] * in_size
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        acc_up = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        acc_t = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)  # dot mode: weight rows x tokens
        acc_up_t = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
        for k0 in range(0, in_size, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            is_k = ks < in_size
            w_mask = is_col[:, None] & is_k[None, :]
            w = tl.load(w_rows + ks[None, :], mask=w_mask, other=0.0)  # [BLOCK_N, BLOCK_K]
            w_up = w
            if IS_PAIRED:
                w_up = tl.load(w_rows + pair_offset + ks[None, :], mask=w_mask, other=0.0)
            gain = tl.zeros([BLOCK_K], dtype=tl.float32)
            if HAS_NORM:
                gain = tl.load(norm_weight_ptr + ks, mask=is_k, other=0.0).to(tl.float32)
            # RMSNorm's roundings (HAS_NORM): the normalized row, then the gain product, each to the 16-bit dtype.
            # 16-bit products are exact in fp32, so either mode sums the eager GEMM's products.
            if IS_DOT:
                x = tl.load(x_rows + ks[None, :], mask=is_token[:, None] & is_k[None, :], other=0.0)
                if HAS_INPUT_GATE:
                    gate_cols = (ks // GATE_GROUP) * GATE_GROUP_STRIDE + ks % GATE_GROUP
                    x = _gated_input(x, gate_ptr + tokens.to(tl.int64)[:, None] * stride_gate + gate_cols[None, :],
                                     is_token[:, None] & is_k[None, :], PRECISE_EXP)
                if HAS_NORM:
                    inv = inv_rms[:, None]
                    if NORM_SPLIT > 0:
                        inv = tl.where((ks < NORM_SPLIT)[None, :], inv_rms[:, None], inv_rms_2[:, None])
                    x = (gain[None, :] * (x.to(tl.float32) * inv).to(dtype).to(tl.float32)).to(dtype)
                if IS_DOT_UPCAST:
                    w, w_up, x = w.to(tl.float32), w_up.to(tl.float32), x.to(tl.float32)
                acc_t = tl.dot(w, tl.trans(x), acc_t, input_precision=DOT_PRECISION)
                if IS_PAIRED:
                    acc_up_t = tl.dot(w_up, tl.trans(x), acc_up_t, input_precision=DOT_PRECISION)
            else:
                # One token at a time against the tile: a [BLOCK_M, BLOCK_N, BLOCK_K] product would spill registers.
                w32 = w.to(tl.float32)
                w_up32 = w_up.to(tl.float32)
                for m in tl.static_range(BLOCK_M):
                    is_token_m = tl.full([BLOCK_K], m, tl.int32) < num_tokens
                    x_m = tl.load(x_ptr + m * stride_x + ks, mask=is_k & is_token_m, other=0.0)  # [BLOCK_K]
                    if HAS_INPUT_GATE:
                        gate_cols = (ks // GATE_GROUP) * GATE_GROUP_STRIDE + ks % GATE_GROUP
                        x_m = _gated_input(x_m, gate_ptr + m * stride_gate + gate_cols, is_k & is_token_m,
                                           PRECISE_EXP)
                    if HAS_NORM:
                        inv_m = tl.sum(tl.where(tokens == m, inv_rms, 0.0), axis=0)
                        if NORM_SPLIT > 0:
                            inv_m_2 = tl.sum(tl.where(tokens == m, inv_rms_2, 0.0), axis=0)
                            inv_m = tl.where(ks < NORM_SPLIT, inv_m, inv_m_2)
                        x_m = (gain * (x_m.to(tl.float32) * inv_m).to(dtype).to(tl.float32)).to(dtype)
                    x_m32 = x_m.to(tl.float32)[None, :]
                    is_m = tokens[:, None] == m
                    acc += tl.where(is_m, tl.sum(w32 * x_m32, axis=1)[None, :], 0.0)
                    if IS_PAIRED:
                        acc_up += tl.where(is_m, tl.sum(w_up32 * x_m32, axis=1)[None, :], 0.0)
        if IS_DOT:
            acc = tl.trans(acc_t)
            acc_up = tl.trans(acc_up_t)
        if HAS_ROPE:
            if HAS_BIAS:  # before the projection's rounding in the epilogue
                acc += tl.load(bias_ptr + cols).to(tl.float32)[None, :]
                acc_up += tl.load(bias_ptr + cols + HALF).to(tl.float32)[None, :]
            rope_store_epilogue(acc, acc_up, head, dims, tokens, is_token, out_ptr, stride_out, cos_sin_ptr,
                                stride_cs_token, stride_cs_kind, slot_mapping_ptr, k_cache_ptr, stride_kc_slot,
                                stride_kc_head, v_cache_ptr, stride_vc_slot, stride_vc_head,
                                NUM_Q_HEADS, NUM_KV_HEADS, HALF)
        else:
            if HAS_BIAS:
                acc += tl.load(bias_ptr + cols, mask=is_col, other=0.0).to(tl.float32)[None, :]
            result = acc
            if IS_GATED:
                gate = acc.to(dtype).to(tl.float32)
                up = acc_up.to(dtype).to(tl.float32)
                # As kernels/activation.py: torch's fp32 silu with IEEE division, rounded, then a rounded multiply.
                if PRECISE_EXP:
                    exp_neg = libdevice.exp(-gate)
                else:
                    exp_neg = tl.exp(-gate)
                silu = tl.math.div_rn(gate, 1.0 + exp_neg).to(dtype).to(tl.float32)
                result = silu * up
            out_mask = is_token[:, None] & is_col[None, :]
            if HAS_RESIDUAL:
                residual = tl.load(residual_ptr + tokens.to(tl.int64)[:, None] * stride_residual + cols[None, :],
                                   mask=out_mask, other=0.0)
                result = result.to(dtype).to(tl.float32) + residual.to(tl.float32)
            tl.store(out_ptr + tokens.to(tl.int64)[:, None] * stride_out + cols[None, :], result.to(dtype),
                     mask=out_mask)


def gemv(
    x: torch.Tensor,  # [num_tokens, in_size], num_tokens <= MAX_TOKENS
    weight: torch.Tensor,  # [out, in_size] contiguous; [gate; up] rows, [2 * out, in_size], if is_gated
    *,
    norm_weight: torch.Tensor | None = None,  # [in_size]: project RMSNorm(x) instead of x
    eps: float = 0.0,
    is_gated: bool = False,
    residual: torch.Tensor | None = None,  # [num_tokens, out]: return residual + projection
    bias: torch.Tensor | None = None,  # [out]: added to the projection (not with is_gated)
    rope: RopeStore | None = None,  # weight is qkv: rotate q and k, store k and v, return q alone
    config: GemvConfig | None = None,
    norm_split: int = 0,  # > 0 (with norm_weight): RMSNorm(x[:, :split]) and RMSNorm(x[:, split:]) side by side
    input_gate: InputGate | None = None,  # project x * sigmoid(gate) (not with norm_weight)
) -> torch.Tensor:  # [num_tokens, out] in x's dtype ([num_tokens, num_q_heads * head_dim] with `rope`)
    """`[residual +] [silu(gate) * up of] ((RMSNorm(x) | x [* sigmoid(gate)]) @ weight.T [+ bias])` in one
    kernel."""
    check_runnable(_gemv_kernel, x)
    num_tokens, in_size = x.shape
    if num_tokens > MAX_TOKENS:
        raise ValueError(f"gemv takes at most {MAX_TOKENS} tokens, got {num_tokens}")
    if weight.shape[1] != in_size or not weight.is_contiguous():
        raise ValueError(f"gemv needs a contiguous [out, {in_size}] weight, got {tuple(weight.shape)}")
    if x.stride(-1) != 1:
        x = x.contiguous()
    out_features = weight.shape[0] // 2 if is_gated else weight.shape[0]
    if residual is not None and tuple(residual.shape) != (num_tokens, out_features):
        raise ValueError(f"gemv residual {tuple(residual.shape)} is not [{num_tokens}, {out_features}]")
    if norm_weight is not None and tuple(norm_weight.shape) != (in_size,):
        raise ValueError(f"gemv norm weight {tuple(norm_weight.shape)} is not [{in_size}]")
    if bias is not None and (is_gated or tuple(bias.shape) != (weight.shape[0],) or bias.stride(-1) != 1):
        raise ValueError(f"gemv bias {tuple(bias.shape)} is not a contiguous [{weight.shape[0]}] (nor gated)")
    if norm_split and (norm_weight is None or not 0 < norm_split < in_size):
        raise ValueError(f"gemv norm_split {norm_split} needs a norm weight and 0 < split < {in_size}")
    if rope is not None:
        check_rope(rope, num_tokens, out_features, is_gated or residual is not None)
    if input_gate is not None:
        _check_input_gate(input_gate, num_tokens, in_size, norm_weight is not None)
    out_width = out_features if rope is None else rope.num_q_heads * rope.head_dim
    out = torch.empty((num_tokens, out_width), dtype=x.dtype, device=x.device)
    if residual is not None and residual.stride(-1) != 1:
        residual = residual.contiguous()
    if num_tokens == 0:
        return out
    config = config or default_config(num_tokens, in_size, norm_weight is not None, is_gated, residual is not None,
                                      x.element_size())
    block_m = max(16, next_pow2(num_tokens)) if config.is_dot else next_pow2(num_tokens)
    rows_per_tile = config.block_n
    if rope is not None:
        # The same weight rows a tile, half from each half of a head. One program per tile: on the H100 (Triton
        # 3.6) the epilogue's per-head branches came out wrong under a persistent, flattened tile loop.
        config = replace(config, block_n=min(max(config.block_n // 2, 1), rope.head_dim // 2), programs_per_sm=0,
                         is_flat=False)
        rows_per_tile = 2 * config.block_n
    num_programs = triton.cdiv(out_features, rows_per_tile)
    if config.programs_per_sm:
        num_programs = min(num_programs, config.programs_per_sm * sm_count(x.device))
    is_upcast = x.dtype == torch.bfloat16 and is_interpreted(_gemv_kernel)
    cos_sin, slots, k_cache, v_cache = (out, out, out, out) if rope is None else (
        rope.cos_sin, rope.slot_mapping, rope.k_cache, rope.v_cache)  # placeholders the kernel never touches
    cache_strides = (0,) * 4 if rope is None else (*slot_strides(rope.k_cache), *slot_strides(rope.v_cache))
    _gemv_kernel[(num_programs,)](
        x, weight, out if norm_weight is None else norm_weight, out if residual is None else residual,
        out if bias is None else bias, out,
        cos_sin, slots, k_cache, v_cache, x if input_gate is None else input_gate.source,
        num_tokens, out_features, eps,
        x.stride(0), out.stride(0) if residual is None else residual.stride(0), out.stride(0),
        0 if input_gate is None else input_gate.source.stride(0),
        *((0, 0) if rope is None else rope.cos_sin.stride()[:2]), *cache_strides,
        HAS_NORM=norm_weight is not None,
        IS_GATED=is_gated,
        HAS_RESIDUAL=residual is not None,
        HAS_BIAS=bias is not None,
        IN_SIZE=in_size,
        PRECISE_EXP=x.device.type == "cuda",
        IS_DOT=config.is_dot,
        DOT_PRECISION="ieee" if x.dtype == torch.float32 or is_upcast else "tf32",
        IS_DOT_UPCAST=is_upcast,
        BLOCK_M=block_m,
        BLOCK_N=config.block_n,
        BLOCK_K=config.block_k,
        RMS_BLOCK=min(next_pow2(in_size), max(config.block_k, RMS_ELEMENTS // block_m)),
        NORM_SPLIT=norm_split,
        FLATTEN=config.is_flat,
        HAS_ROPE=rope is not None,
        NUM_Q_HEADS=0 if rope is None else rope.num_q_heads,
        NUM_KV_HEADS=0 if rope is None else rope.num_kv_heads,
        HEAD_DIM=2 if rope is None else rope.head_dim,
        HAS_INPUT_GATE=input_gate is not None,
        GATE_GROUP=1 if input_gate is None else input_gate.group,
        GATE_GROUP_STRIDE=1 if input_gate is None else input_gate.group_stride,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
        # fp32: an fma would round once where the eager RoPE's mul, mul, add round three times (kernels/rope.py)
        enable_fp_fusion=rope is None or x.dtype != torch.float32, **launch_overlap(x),
    )
    return out


def _check_input_gate(gate: InputGate, num_tokens: int, in_size: int, has_norm: bool) -> None:
    last = (in_size - 1) // gate.group * gate.group_stride + (in_size - 1) % gate.group
    if (has_norm or gate.source.shape[0] != num_tokens or gate.source.stride(-1) != 1 or gate.group < 1
            or gate.group_stride < gate.group or gate.source.shape[1] <= last):
        raise ValueError(f"gemv input gate: a [{num_tokens}, > {last}] source with a contiguous last dim, groups of "
                         f"at least 1 column at least a group apart, and no norm")
