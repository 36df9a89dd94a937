"""The previous design of the routed-expert kernels, kept only as the baseline `scripts/bench_moe_kernels.py` times
the engine's kernels (kernels/moe_gemv.py) against; delete it once kernels/moe_tiles.TUNED holds the H100 winners.
Routed experts for decode and verify batches (1 to 64 tokens) in two grouped kernels (three when the down
projection is split).

A decode step at small batch reads each active expert's weights once and does little math, so the work is laid out
by expert: the k (token, expert) slots of every token are sorted by expert (`sort_by_expert`, one single-program
kernel, no host sync; `sort_by_expert_reference` is the same in torch ops), giving each expert a contiguous range of rows, `cu_num_slots_per_expert`, and the list of active experts.

- gate_up: one program per (active expert, tile of intermediate features) multiplies the expert's [gate; up] rows
  with the tokens of its range (gathered from x), applies the activation and writes one row per slot, in sorted
  order. Inactive experts cost a program that exits at once; their weights are never read.
- down + combine: one program per tile of hidden features walks the active experts in ascending order and adds
  weight * down(row) into every token's output in registers. No atomics: each output is summed in the same order
  on every run (ascending expert id, as the reference's loop), and a token's output holds only its own rows (a
  gather picks them, so a non-finite row of one token never reaches another). With `down_split` > 1 (small
  batches: more programs in flight), program (tile, s) walks active experts s, s + split, ... into an fp32 partial
  sum, and a third kernel adds the partial sums in split order and rounds once: a fixed order still, another one.

Padded rows of a CUDA-graph batch come with expert id `num_experts` (see specbench/models/moe_routing.py): they sort
behind every real slot, belong to no expert's range, and their outputs are zero.

Roundings follow the eager reference (specbench/models/moe.py): each projection's output (bias included) is rounded
to the input dtype, the activation rounds where torch's ops round, the weighted sum over a token's experts is fp32
and rounded once. So in fp32 the kernels differ from it only by the GEMMs' summation order.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from specbench.kernels.moe_sort import ExpertSort, sort_by_expert, sort_by_expert_reference
from specbench.kernels.runtime import check_runnable, is_interpreted, next_pow2

__all__ = ["ExpertSort", "MoeKernelConfig", "fused_experts", "sort_by_expert", "sort_by_expert_reference"]

MAX_TOKENS = 64  # a decode or verify batch; past it a grouped GEMM with larger tiles pays off


@dataclass(frozen=True)
class MoeKernelConfig:
    block_m: int  # sorted rows (slots of one expert) per tensor-core step; at least 16
    block_n_gate_up: int  # intermediate features per gate_up program
    block_n_down: int  # hidden features per down program
    block_k: int  # reduction width per step of the weight walk
    num_warps: int = 4
    num_stages: int = 3
    # Programs per tile of hidden features in down + combine, each walking every down_split-th active expert into
    # an fp32 partial sum that a reduce kernel adds up in split order (deterministic; no atomics). 1: the down
    # kernel walks them all and writes the output itself.
    down_split: int = 1


def default_config(element_size: int, num_tokens: int = MAX_TOKENS, num_experts: int = 1) -> MoeKernelConfig:
    """Tiles by batch size, chosen on the host from shapes only (a CUDA graph captures one launch; nothing is
    autotuned at run time).

    The down projection's split depends on the expert count alone, never on the batch: a CUDA-graph batch padded
    to its bucket then adds each output over the experts in the same order as its real rows alone would."""
    # fp32 (checking runs) halves the width: the same bytes per pipelined tile.
    # Up to 8 programs per hidden tile walk the active experts (at one token, 128 hidden tiles each walking 8
    # experts in sequence would leave most of the machine waiting on each expert's first loads).
    down_split = _pow2_at_most(min(8, num_experts))
    if num_tokens <= 16:
        # Few tokens: each expert's weights are read once by few programs. Narrow gate_up tiles make more programs
        # to spread over the SMs; a deeper K step keeps more bytes in flight per program.
        return MoeKernelConfig(block_m=16, block_n_gate_up=16, block_n_down=16, block_k=512 // element_size,
                               down_split=down_split)
    return MoeKernelConfig(block_m=16, block_n_gate_up=32, block_n_down=16, block_k=256 // element_size,
                           down_split=down_split)


def _pow2_at_most(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


@triton.jit
def _round(x, dtype: tl.constexpr):
    return x.to(dtype).to(tl.float32)


@triton.jit
def _exp(x, PRECISE_EXP: tl.constexpr):
    # libdevice has no interpreter implementation: numpy's exp stands in on CPU (as kernels/activation.py).
    if PRECISE_EXP:
        return libdevice.exp(x)
    else:
        return tl.exp(x)


@triton.jit
def _gate_up_kernel(
    x_ptr,  # [num_tokens, HIDDEN]
    weight_ptr,  # [num_experts, 2 * inter, HIDDEN]: each expert's gate rows, then its up rows
    bias_ptr,  # [num_experts, 2 * inter] (HAS_BIAS only)
    out_ptr,  # [num_tokens * TOP_K, inter]: activation of sorted row r
    sorted_slots_ptr, cu_ptr, active_ptr, num_active_ptr,  # ExpertSort
    inter, stride_x, swiglu_alpha, swiglu_limit,
    HIDDEN: tl.constexpr,
    TOP_K: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    IS_SWIGLU_OAI: tl.constexpr,
    PRECISE_EXP: tl.constexpr,
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 inputs: the eager fp32 GEMM does not round to TF32
    IS_DOT_UPCAST: tl.constexpr,  # the CPU interpreter's 16-bit dot is unreliable; fp32 sums the same products
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    active = tl.program_id(0)
    if active < tl.load(num_active_ptr):
        expert = tl.load(active_ptr + active).to(tl.int64)
        row_start = tl.load(cu_ptr + expert)
        row_end = tl.load(cu_ptr + expert + 1)
        dtype = out_ptr.dtype.element_ty
        cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        is_col = cols < inter
        gate_rows = weight_ptr + expert * 2 * inter * HIDDEN + cols.to(tl.int64)[:, None] * HIDDEN
        up_rows = gate_rows + inter * HIDDEN
        for m0 in range(row_start, row_end, BLOCK_M):
            rows = m0 + tl.arange(0, BLOCK_M)
            is_row = rows < row_end
            tokens = tl.load(sorted_slots_ptr + rows, mask=is_row, other=0) // TOP_K
            x_rows = x_ptr + tokens.to(tl.int64)[:, None] * stride_x
            # Weight rows as the MMA's M side, the expert's few tokens as its N side (a skinny GEMM, operands
            # swapped as in kernels/gemv.py).
            acc_gate = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
            acc_up = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
            for k0 in range(0, HIDDEN, BLOCK_K):
                ks = k0 + tl.arange(0, BLOCK_K)
                is_k = ks < HIDDEN
                x = tl.load(x_rows + ks[None, :], mask=is_row[:, None] & is_k[None, :], other=0.0)
                w_mask = is_col[:, None] & is_k[None, :]
                w_gate = tl.load(gate_rows + ks[None, :], mask=w_mask, other=0.0)
                w_up = tl.load(up_rows + ks[None, :], mask=w_mask, other=0.0)
                if IS_DOT_UPCAST:
                    x, w_gate, w_up = x.to(tl.float32), w_gate.to(tl.float32), w_up.to(tl.float32)
                acc_gate = tl.dot(w_gate, tl.trans(x), acc_gate, input_precision=DOT_PRECISION)
                acc_up = tl.dot(w_up, tl.trans(x), acc_up, input_precision=DOT_PRECISION)
            if HAS_BIAS:
                bias_row = bias_ptr + expert * 2 * inter
                acc_gate += tl.load(bias_row + cols, mask=is_col, other=0.0).to(tl.float32)[:, None]
                acc_up += tl.load(bias_row + inter + cols, mask=is_col, other=0.0).to(tl.float32)[:, None]
            gate = _round(acc_gate, dtype)  # F.linear's output rounding
            up = _round(acc_up, dtype)
            if IS_SWIGLU_OAI:
                gate = tl.minimum(gate, swiglu_limit)
                up = tl.minimum(tl.maximum(up, -swiglu_limit), swiglu_limit)
                # torch rounds each op: gate * alpha, sigmoid, gate * sigmoid, up + 1, the product.
                sig = _round(tl.math.div_rn(1.0, 1.0 + _exp(-_round(gate * swiglu_alpha, dtype), PRECISE_EXP)), dtype)
                result = _round(up + 1.0, dtype) * _round(gate * sig, dtype)
            else:
                # torch's fp32 silu with IEEE division, rounded, then a rounded multiply (kernels/activation.py).
                result = _round(tl.math.div_rn(gate, 1.0 + _exp(-gate, PRECISE_EXP)), dtype) * up
            tl.store(out_ptr + rows.to(tl.int64)[None, :] * inter + cols[:, None], result.to(dtype),
                     mask=is_col[:, None] & is_row[None, :])


@triton.jit
def _down_combine_kernel(
    act_ptr,  # [num_tokens * TOP_K, INTER]: gate_up's output, sorted rows
    weight_ptr,  # [num_experts, hidden, INTER]
    bias_ptr,  # [num_experts, hidden] (HAS_BIAS only)
    topk_weights_ptr,  # [num_tokens * TOP_K] fp32, by slot
    out_ptr,  # [num_tokens, hidden] (SPLIT 1) or fp32 [SPLIT, num_tokens, hidden] partial sums
    sorted_slots_ptr, cu_ptr, active_ptr, num_active_ptr,  # ExpertSort
    num_tokens, hidden, stride_out, stride_split,
    SPLIT: tl.constexpr,  # program_id(1) walks active experts program_id(1), + SPLIT, ...
    INTER: tl.constexpr,
    TOP_K: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    IS_DOT_UPCAST: tl.constexpr,
    BLOCK_T: tl.constexpr,  # every token of the batch: the combine's accumulator is [BLOCK_N, BLOCK_T]
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    dtype = out_ptr.dtype.element_ty
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    is_col = cols < hidden
    token_ids = tl.arange(0, BLOCK_T)
    acc = tl.zeros([BLOCK_N, BLOCK_T], dtype=tl.float32)
    num_active = tl.load(num_active_ptr)
    for active in range(tl.program_id(1), num_active, SPLIT):
        expert = tl.load(active_ptr + active).to(tl.int64)
        row_start = tl.load(cu_ptr + expert)
        row_end = tl.load(cu_ptr + expert + 1)
        w_rows = weight_ptr + expert * hidden * INTER + cols.to(tl.int64)[:, None] * INTER
        for m0 in range(row_start, row_end, BLOCK_M):
            rows = m0 + tl.arange(0, BLOCK_M)
            is_row = rows < row_end
            slots = tl.load(sorted_slots_ptr + rows, mask=is_row, other=0)
            part = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
            for k0 in range(0, INTER, BLOCK_K):
                ks = k0 + tl.arange(0, BLOCK_K)
                is_k = ks < INTER
                a = tl.load(act_ptr + rows.to(tl.int64)[:, None] * INTER + ks[None, :],
                            mask=is_row[:, None] & is_k[None, :], other=0.0)
                w = tl.load(w_rows + ks[None, :], mask=is_col[:, None] & is_k[None, :], other=0.0)
                if IS_DOT_UPCAST:
                    a, w = a.to(tl.float32), w.to(tl.float32)
                part = tl.dot(w, tl.trans(a), part, input_precision=DOT_PRECISION)
            if HAS_BIAS:
                part += tl.load(bias_ptr + expert * hidden + cols, mask=is_col, other=0.0).to(tl.float32)[:, None]
            routing_weight = tl.load(topk_weights_ptr + slots, mask=is_row, other=0.0)
            part = _round(part, dtype) * routing_weight[None, :]  # the expert's rounded output, weighted in fp32
            # Combine: an expert holds each token at most once, so token t takes column src[t] of `part` if it has
            # one. A gather, not a one-hot product: 0 * inf would carry one token's overflow into the others.
            tokens = tl.where(is_row, slots // TOP_K, -1)
            is_match = tokens[:, None] == token_ids[None, :]  # [BLOCK_M, BLOCK_T]
            src = tl.sum(tl.where(is_match, tl.arange(0, BLOCK_M)[:, None], 0), axis=0)  # [BLOCK_T]
            is_hit = tl.max(is_match.to(tl.int32), axis=0) > 0
            picked = tl.gather(part, tl.broadcast_to(src[None, :], [BLOCK_N, BLOCK_T]), axis=1)
            acc += tl.where(is_hit[None, :], picked, 0.0)
    # SPLIT 1: the output, rounded once; else this split's fp32 partial sum (dtype is then fp32: no rounding).
    tl.store(out_ptr + tl.program_id(1) * stride_split + token_ids.to(tl.int64)[None, :] * stride_out + cols[:, None],
             acc.to(dtype), mask=is_col[:, None] & (token_ids < num_tokens)[None, :])


@triton.jit
def _reduce_splits_kernel(
    part_ptr,  # [SPLIT, num_tokens, hidden] fp32
    out_ptr,  # [num_tokens, hidden]
    num_tokens, hidden, stride_out,
    SPLIT: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    token = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    is_col = cols < hidden
    splits = tl.arange(0, SPLIT)
    part = tl.load(part_ptr + splits[:, None] * num_tokens * hidden + token * hidden + cols[None, :],
                   mask=is_col[None, :], other=0.0)
    tl.store(out_ptr + token * stride_out + cols, tl.sum(part, axis=0).to(out_ptr.dtype.element_ty), mask=is_col)


def is_interpreted_here() -> bool:
    """Whether this process runs the kernels under the CPU interpreter (TRITON_INTERPRET=1 at triton's import)."""
    return is_interpreted(_gate_up_kernel)


def fused_experts(
    x: torch.Tensor,  # [num_tokens, hidden], num_tokens <= MAX_TOKENS
    topk_ids: torch.Tensor,  # [num_tokens, k] int64; num_experts on padded rows
    topk_weights: torch.Tensor,  # [num_tokens, k] fp32
    gate_up_weight: torch.Tensor,  # [num_experts, 2 * inter, hidden] contiguous, rows [gate; up]
    down_weight: torch.Tensor,  # [num_experts, hidden, inter] contiguous
    *,
    gate_up_bias: torch.Tensor | None = None,  # [num_experts, 2 * inter]
    down_bias: torch.Tensor | None = None,  # [num_experts, hidden]
    is_swiglu_oai: bool = False,  # gpt-oss's clamped activation instead of silu(gate) * up
    swiglu_alpha: float = 1.702,
    swiglu_limit: float = 7.0,
    config: MoeKernelConfig | None = None,
    order: ExpertSort | None = None,  # topk_ids sorted by expert, if already made (kernels/moe_route.py)
) -> torch.Tensor:  # [num_tokens, hidden] in x's dtype: sum over k of weight * expert(x); zero on padded rows
    check_runnable(_gate_up_kernel, x)
    num_tokens, hidden = x.shape
    num_experts, two_inter, _ = gate_up_weight.shape
    inter = two_inter // 2
    top_k = topk_ids.shape[1]
    if num_tokens > MAX_TOKENS:
        raise ValueError(f"fused_experts takes at most {MAX_TOKENS} tokens, got {num_tokens}")
    if tuple(gate_up_weight.shape[1:]) != (2 * inter, hidden) or tuple(down_weight.shape) != (num_experts, hidden,
                                                                                                inter):
        raise ValueError(f"expert weights {tuple(gate_up_weight.shape)} / {tuple(down_weight.shape)} are not "
                         f"[{num_experts}, 2 * inter, {hidden}] / [{num_experts}, {hidden}, inter]")
    if not (gate_up_weight.is_contiguous() and down_weight.is_contiguous()):
        raise ValueError("fused_experts needs contiguous expert weights")
    if (gate_up_bias is None) != (down_bias is None):
        raise ValueError("fused_experts takes both expert biases or neither")
    if tuple(topk_ids.shape) != tuple(topk_weights.shape) or topk_ids.shape[0] != num_tokens:
        raise ValueError(f"routing {tuple(topk_ids.shape)} / {tuple(topk_weights.shape)} is not [{num_tokens}, k]")
    out = torch.empty((num_tokens, hidden), dtype=x.dtype, device=x.device)
    if num_tokens == 0:
        return out
    if x.stride(-1) != 1:
        x = x.contiguous()
    config = config or default_config(x.element_size(), num_tokens, num_experts)
    tile_sides = (config.block_m, config.block_n_gate_up, config.block_n_down, config.block_k)
    if min(tile_sides) < 16 or any(side & (side - 1) for side in tile_sides):
        raise ValueError(f"fused_experts tiles must be powers of two of at least 16 (tl.dot), got {config}")
    if config.down_split < 1 or config.down_split & (config.down_split - 1):
        raise ValueError(f"fused_experts down_split must be a power of two, got {config.down_split}")
    if order is None:
        order = sort_by_expert(topk_ids, num_experts)
    slot_weights = topk_weights.reshape(-1).float().contiguous()
    act = torch.empty((num_tokens * top_k, inter), dtype=x.dtype, device=x.device)  # padded slots' rows unwritten
    is_upcast = x.dtype != torch.float32 and is_interpreted(_gate_up_kernel)
    dot_precision = "ieee" if x.dtype == torch.float32 or is_upcast else "tf32"
    has_bias = gate_up_bias is not None
    sort_args = (order.sorted_slots, order.cu_num_slots_per_expert, order.active_experts, order.num_active_experts)
    # The grid depends on shapes only (CUDA-graph safe): programs past the active experts exit at once.
    _gate_up_kernel[(min(num_experts, num_tokens * top_k), triton.cdiv(inter, config.block_n_gate_up))](
        x, gate_up_weight, gate_up_bias if has_bias else x, act, *sort_args,
        inter, x.stride(0), swiglu_alpha, swiglu_limit,
        HIDDEN=hidden, TOP_K=top_k, HAS_BIAS=has_bias, IS_SWIGLU_OAI=is_swiglu_oai,
        PRECISE_EXP=x.device.type == "cuda", DOT_PRECISION=dot_precision, IS_DOT_UPCAST=is_upcast,
        BLOCK_M=config.block_m, BLOCK_N=config.block_n_gate_up, BLOCK_K=min(config.block_k, max(16, next_pow2(hidden))),
        num_warps=config.num_warps, num_stages=config.num_stages,
    )
    split = config.down_split
    # [split, num_tokens, hidden] fp32 partial sums when split; every program writes its whole tile (zeros if it
    # got no expert), so the buffer needs no clearing.
    partial = torch.empty((split, num_tokens, hidden), dtype=torch.float32, device=x.device) if split > 1 else out
    _down_combine_kernel[(triton.cdiv(hidden, config.block_n_down), split)](
        act, down_weight, down_bias if has_bias else x, slot_weights, partial, *sort_args,
        num_tokens, hidden, hidden if split > 1 else out.stride(0), num_tokens * hidden, SPLIT=split,
        INTER=inter, TOP_K=top_k, HAS_BIAS=has_bias, DOT_PRECISION=dot_precision, IS_DOT_UPCAST=is_upcast,
        BLOCK_T=max(16, next_pow2(num_tokens)), BLOCK_M=config.block_m, BLOCK_N=config.block_n_down,
        BLOCK_K=min(config.block_k, max(16, next_pow2(inter))),
        num_warps=config.num_warps, num_stages=config.num_stages,
    )
    if split > 1:
        _reduce_splits_kernel[(num_tokens, triton.cdiv(hidden, 1024))](
            partial, out, num_tokens, hidden, out.stride(0), SPLIT=split, BLOCK_N=1024, num_warps=4)
    return out
