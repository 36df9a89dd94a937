"""The expert kernels on the CUDA cores (kernels/moe_gemv.py has the layout, the roundings and the host side):
each program owns a few weight rows of one expert and streams them across the whole input width in a few wide
steps, as kernels/gemv.py does at one token.

- One token: programs take their experts straight from topk_ids (no sort). gate_up programs own (tile, slot j);
  down programs own a tile of hidden features and walk the token's k experts in slot order, so the weighted combine
  is in their registers and needs no third kernel.
- More tokens (tokens sorted by expert): programs own (tile, active expert) and stream their tile once per token of
  the expert. The first pass reads DRAM; the next ones find the tile in L2 (a few KB, read again at once), so the
  bytes from DRAM stay one pass while the multiplies stay one per weight and token. Meant for batches whose experts
  hold one or two tokens each (top-8 of 128 at up to 16 tokens); down writes per-slot rows for the combine kernel.
"""

from __future__ import annotations

import triton
import triton.language as tl

from specbench.kernels.moe_epilogue import gated_activation, round_to
from specbench.kernels.pdl import wait_for_inputs


@triton.jit
def gate_up_one_token_kernel(
    x_ptr,  # [1, HIDDEN]
    ids_ptr,  # [TOP_K] integer: the token's experts; NUM_EXPERTS on a padded row
    weight_ptr,  # [num_experts, 2 * INTER, HIDDEN]: each expert's gate rows, then its up rows
    bias_ptr,  # [num_experts, 2 * INTER] (HAS_BIAS only)
    act_ptr,  # [TOP_K, INTER]: the activation of slot j
    swiglu_alpha, swiglu_limit,
    NUM_EXPERTS: tl.constexpr,
    HIDDEN: tl.constexpr,
    INTER: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    IS_SWIGLU_OAI: tl.constexpr,
    PRECISE_EXP: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    slot = tl.program_id(1)
    expert = tl.load(ids_ptr + slot).to(tl.int64)  # int64 offsets: experts x rows x width may pass 2^31
    if expert < NUM_EXPERTS:  # a padded row's slots read nothing; the down kernel skips them
        dtype = act_ptr.dtype.element_ty
        cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        is_col = cols < INTER
        gate_rows = weight_ptr + expert * (2 * INTER * HIDDEN) + cols.to(tl.int64)[:, None] * HIDDEN
        acc_gate = tl.zeros([BLOCK_N], dtype=tl.float32)
        acc_up = tl.zeros([BLOCK_N], dtype=tl.float32)
        # Unrolled (a few steps: the tiles take up to 2048 elements a step), so every load can issue up front.
        for k0 in tl.static_range(0, HIDDEN, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            is_k = ks < HIDDEN
            x = tl.load(x_ptr + ks, mask=is_k, other=0.0).to(tl.float32)[None, :]
            w_mask = is_col[:, None] & is_k[None, :]
            w_gate = tl.load(gate_rows + ks[None, :], mask=w_mask, other=0.0)
            w_up = tl.load(gate_rows + INTER * HIDDEN + ks[None, :], mask=w_mask, other=0.0)
            acc_gate += tl.sum(w_gate.to(tl.float32) * x, axis=1)
            acc_up += tl.sum(w_up.to(tl.float32) * x, axis=1)
        if HAS_BIAS:
            bias_row = bias_ptr + expert * (2 * INTER)
            acc_gate += tl.load(bias_row + cols, mask=is_col, other=0.0).to(tl.float32)
            acc_up += tl.load(bias_row + INTER + cols, mask=is_col, other=0.0).to(tl.float32)
        result = gated_activation(acc_gate, acc_up, swiglu_alpha, swiglu_limit, dtype, IS_SWIGLU_OAI, PRECISE_EXP)
        tl.store(act_ptr + slot * INTER + cols, result.to(dtype), mask=is_col)


@triton.jit
def down_one_token_kernel(
    act_ptr,  # [TOP_K, INTER]
    ids_ptr,  # [TOP_K] int64
    topk_weights_ptr,  # [TOP_K] fp32
    weight_ptr,  # [num_experts, HIDDEN, INTER]
    bias_ptr,  # [num_experts, HIDDEN] (HAS_BIAS only)
    out_ptr,  # [1, HIDDEN]
    NUM_EXPERTS: tl.constexpr,
    HIDDEN: tl.constexpr,
    INTER: tl.constexpr,
    TOP_K: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    dtype = out_ptr.dtype.element_ty
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    is_col = cols < HIDDEN
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    # Unrolled over the k slots and their K steps: every expert's tile address is known up front, so their loads
    # can overlap.
    for j in tl.static_range(TOP_K):
        expert = tl.load(ids_ptr + j).to(tl.int64)
        is_real = expert < NUM_EXPERTS
        w_rows = weight_ptr + tl.where(is_real, expert, 0) * (HIDDEN * INTER) + cols.to(tl.int64)[:, None] * INTER
        width = tl.where(is_real, INTER, 0)  # a padded slot loads nothing
        part = tl.zeros([BLOCK_N], dtype=tl.float32)
        for k0 in tl.static_range(0, INTER, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            is_k = ks < width
            a = tl.load(act_ptr + j * INTER + ks, mask=is_k, other=0.0).to(tl.float32)
            w = tl.load(w_rows + ks[None, :], mask=is_col[:, None] & is_k[None, :], other=0.0)
            part += tl.sum(w.to(tl.float32) * a[None, :], axis=1)
        if HAS_BIAS:
            part += tl.load(bias_ptr + tl.where(is_real, expert, 0) * HIDDEN + cols, mask=cols < tl.where(is_real, HIDDEN, 0),
                            other=0.0).to(tl.float32)
        routing_weight = tl.load(topk_weights_ptr + j)
        # The expert's rounded output, weighted in fp32; a padded slot adds nothing (not even 0 * inf).
        acc += tl.where(is_real, round_to(part, dtype) * routing_weight, 0.0)
    tl.store(out_ptr + cols, acc.to(dtype), mask=is_col)


@triton.jit
def gate_up_grouped_cores_kernel(
    x_ptr,  # [num_tokens, HIDDEN]
    weight_ptr,  # [num_experts, 2 * INTER, HIDDEN]
    bias_ptr,  # [num_experts, 2 * INTER] (HAS_BIAS only)
    act_ptr,  # [num_tokens * TOP_K, INTER]: the activation of slot t * TOP_K + j
    sorted_slots_ptr, cu_ptr, active_ptr, num_active_ptr,  # ExpertSort
    stride_x, swiglu_alpha, swiglu_limit,
    HIDDEN: tl.constexpr,
    INTER: tl.constexpr,
    TOP_K: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    IS_SWIGLU_OAI: tl.constexpr,
    PRECISE_EXP: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    active = tl.program_id(1)
    if active < tl.load(num_active_ptr):
        expert = tl.load(active_ptr + active).to(tl.int64)
        dtype = act_ptr.dtype.element_ty
        cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        is_col = cols < INTER
        gate_rows = weight_ptr + expert * (2 * INTER * HIDDEN) + cols.to(tl.int64)[:, None] * HIDDEN
        for row in range(tl.load(cu_ptr + expert), tl.load(cu_ptr + expert + 1)):
            slot = tl.load(sorted_slots_ptr + row).to(tl.int64)
            x_row = x_ptr + (slot // TOP_K) * stride_x
            acc_gate = tl.zeros([BLOCK_N], dtype=tl.float32)
            acc_up = tl.zeros([BLOCK_N], dtype=tl.float32)
            for k0 in tl.static_range(0, HIDDEN, BLOCK_K):
                ks = k0 + tl.arange(0, BLOCK_K)
                is_k = ks < HIDDEN
                x = tl.load(x_row + ks, mask=is_k, other=0.0).to(tl.float32)[None, :]
                w_mask = is_col[:, None] & is_k[None, :]
                w_gate = tl.load(gate_rows + ks[None, :], mask=w_mask, other=0.0)
                w_up = tl.load(gate_rows + INTER * HIDDEN + ks[None, :], mask=w_mask, other=0.0)
                acc_gate += tl.sum(w_gate.to(tl.float32) * x, axis=1)
                acc_up += tl.sum(w_up.to(tl.float32) * x, axis=1)
            if HAS_BIAS:
                bias_row = bias_ptr + expert * (2 * INTER)
                acc_gate += tl.load(bias_row + cols, mask=is_col, other=0.0).to(tl.float32)
                acc_up += tl.load(bias_row + INTER + cols, mask=is_col, other=0.0).to(tl.float32)
            result = gated_activation(acc_gate, acc_up, swiglu_alpha, swiglu_limit, dtype, IS_SWIGLU_OAI, PRECISE_EXP)
            tl.store(act_ptr + slot * INTER + cols, result.to(dtype), mask=is_col)


@triton.jit
def down_grouped_cores_kernel(
    act_ptr,  # [num_tokens * TOP_K, INTER], by slot
    weight_ptr,  # [num_experts, HIDDEN, INTER]
    bias_ptr,  # [num_experts, HIDDEN] (HAS_BIAS only)
    topk_weights_ptr,  # [num_tokens * TOP_K] fp32, by slot
    partial_ptr,  # [num_tokens * TOP_K, HIDDEN] fp32: routing weight * the expert's rounded output, by slot
    sorted_slots_ptr, cu_ptr, active_ptr, num_active_ptr,  # ExpertSort
    HIDDEN: tl.constexpr,
    INTER: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    active = tl.program_id(1)
    if active < tl.load(num_active_ptr):
        expert = tl.load(active_ptr + active).to(tl.int64)
        dtype = act_ptr.dtype.element_ty
        cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        is_col = cols < HIDDEN
        w_rows = weight_ptr + expert * (HIDDEN * INTER) + cols.to(tl.int64)[:, None] * INTER
        for row in range(tl.load(cu_ptr + expert), tl.load(cu_ptr + expert + 1)):
            slot = tl.load(sorted_slots_ptr + row).to(tl.int64)
            part = tl.zeros([BLOCK_N], dtype=tl.float32)
            for k0 in tl.static_range(0, INTER, BLOCK_K):
                ks = k0 + tl.arange(0, BLOCK_K)
                is_k = ks < INTER
                a = tl.load(act_ptr + slot * INTER + ks, mask=is_k, other=0.0).to(tl.float32)
                w = tl.load(w_rows + ks[None, :], mask=is_col[:, None] & is_k[None, :], other=0.0)
                part += tl.sum(w.to(tl.float32) * a[None, :], axis=1)
            if HAS_BIAS:
                part += tl.load(bias_ptr + expert * HIDDEN + cols, mask=is_col, other=0.0).to(tl.float32)
            weighted = round_to(part, dtype) * tl.load(topk_weights_ptr + slot)
            tl.store(partial_ptr + slot * HIDDEN + cols, weighted, mask=is_col)
