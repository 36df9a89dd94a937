"""The down projection of a few-token MoE batch (a verify's k + 1 tokens, 2 to FEW_MAX_TOKENS) with the combine in
its epilogue: one launch where kernels/moe_gemv.py runs two (down to per-slot fp32 partials, then a combine), and no
partial rows written to memory and read back (at 4 tokens of Qwen3-30B-A3B, 0.5 MB a layer: a tenth of its experts).

Each program owns BLOCK_N hidden features and walks the batch's active experts in ascending id order. Per expert it
loads the [BLOCK_N, INTER] weight tile once and multiplies it with all of that expert's tokens at once (their
activation rows as a [BLOCK_T, BLOCK_K] tile: a token holds an expert at most once, so an expert has at most
num_tokens rows), so each selected expert's weights cross DRAM once per round, however many tokens of the verify
chose it. The weighted outputs go to per-token fp32 accumulators in registers ([BLOCK_N, BLOCK_T]) through a one-hot
scatter (exact: one term and zeros), and each token's row is stored once, rounded once.

Roundings are the eager reference's (specbench/models/moe.py), summation order included: each expert's output
(bias added) rounded to the input dtype, times the routing weight in fp32, added per token in ascending expert
order. Padded rows of a CUDA-graph batch (expert id num_experts) sit in no expert's range: their output is zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from specbench.kernels.moe_epilogue import round_to
from specbench.kernels.moe_sort import ExpertSort
from specbench.kernels.pdl import launch_overlap, wait_for_inputs
from specbench.kernels.runtime import check_runnable, next_pow2

FEW_MAX_TOKENS = 16  # past it experts hold many tokens and kernels/moe_gemv.py's tensor-core tiles pay off


@dataclass(frozen=True)
class DownCombineTiles:
    block_n: int  # hidden features per program (the grid is hidden / block_n programs)
    block_k: int  # INTER per step of the weight walk
    num_warps: int = 4
    # >1: the compiler pipelines the walk over experts (the next expert's weight tile in flight while this one's
    # tokens multiply). 1 until measured on the H100: each expert is then one dependent round trip per program.
    expert_stages: int = 1
    # True: the kernel itself loads the next expert's first K step while this expert's multiply (two tiles in flight
    # per program, whatever the compiler's pipelining). Off until measured.
    is_prefetched: bool = False


def default_down_combine_tiles(num_tokens: int, inter: int) -> DownCombineTiles:
    """Two rows a program (kernels/gemv.py's one-token design: many programs, each streaming a few long rows); the
    [BLOCK_N, BLOCK_T, BLOCK_K] product tile kept near 8K elements (64 registers a thread on 4 warps)."""
    block_t = next_pow2(num_tokens)
    block_k = max(16, min(next_pow2(inter), 8192 // (2 * block_t)))
    return DownCombineTiles(block_n=2, block_k=block_k, num_warps=4)


@triton.jit
def down_combine_kernel(
    act_ptr,  # [num_tokens * TOP_K, INTER], by slot (kernels/moe_gemv.py expert_gate_up)
    weight_ptr,  # [num_experts, HIDDEN, INTER]
    bias_ptr,  # [num_experts, HIDDEN] (HAS_BIAS only)
    topk_weights_ptr,  # [num_tokens * TOP_K] fp32, by slot
    out_ptr,  # [num_tokens, HIDDEN]: sum over the token's experts of weight * expert output; zero on padded rows
    sorted_slots_ptr, cu_ptr, active_ptr, num_active_ptr,  # ExpertSort
    num_tokens, stride_out,
    HIDDEN: tl.constexpr,
    INTER: tl.constexpr,
    TOP_K: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_T: tl.constexpr,  # >= num_tokens: an expert's rows, and the token accumulators
    BLOCK_A: tl.constexpr,  # >= the most active experts, min(num_experts, num_tokens * TOP_K)
    BLOCK_S: tl.constexpr,  # >= num_tokens * TOP_K, the slots
    EXPERT_STAGES: tl.constexpr,
    IS_PREFETCHED: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    dtype = out_ptr.dtype.element_ty
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    is_col = cols < HIDDEN
    m = tl.arange(0, BLOCK_T)  # an expert's rows
    t = tl.arange(0, BLOCK_T)  # the batch's tokens
    # The sort, whole, in registers up front (a few hundred bytes): inside the walk every expert's index lookups are
    # register reductions, so its weight tile and its tokens' rows load at once, with no chain of dependent loads.
    ai = tl.arange(0, BLOCK_A)  # index into the active experts
    num_active = tl.load(num_active_ptr)
    is_a = ai < num_active
    experts = tl.load(active_ptr + ai, mask=is_a, other=0)  # [BLOCK_A] ascending: the reference's order of the sum
    starts = tl.load(cu_ptr + experts, mask=is_a, other=0)  # [BLOCK_A] each expert's first sorted row
    counts = tl.load(cu_ptr + experts + 1, mask=is_a, other=0) - starts  # [BLOCK_A] its rows (<= num_tokens)
    s = tl.arange(0, BLOCK_S)
    is_s = s < num_tokens * TOP_K
    sorted_slots = tl.load(sorted_slots_ptr + s, mask=is_s, other=0)  # [BLOCK_S]
    sorted_weights = tl.load(topk_weights_ptr + sorted_slots, mask=is_s, other=0.0)  # [BLOCK_S] fp32
    acc = tl.zeros([BLOCK_N, BLOCK_T], dtype=tl.float32)
    k_first = tl.arange(0, BLOCK_K)
    w_first_mask = is_col[:, None] & (k_first < INTER)[None, :]
    col_offsets = cols.to(tl.int64)[:, None] * INTER
    # [BLOCK_N, BLOCK_K]: the first K step of the walk's next expert (IS_PREFETCHED), loaded an expert ahead.
    if IS_PREFETCHED:
        first = tl.sum(tl.where(ai == 0, experts, 0), axis=0).to(tl.int64)
        w_ahead = tl.load(weight_ptr + first * (HIDDEN * INTER) + col_offsets + k_first[None, :],
                          mask=w_first_mask & (k_first * 0 < num_active)[None, :], other=0.0)
    else:
        w_ahead = tl.zeros([BLOCK_N, BLOCK_K], dtype=weight_ptr.dtype.element_ty)  # unused
    for i in tl.range(0, num_active, num_stages=EXPERT_STAGES):
        is_i = ai == i
        expert = tl.sum(tl.where(is_i, experts, 0), axis=0).to(tl.int64)
        row_start = tl.sum(tl.where(is_i, starts, 0), axis=0)
        is_row = m < tl.sum(tl.where(is_i, counts, 0), axis=0)
        # Row m of the expert picks its slot and weight out of the registers (one term and zeros: exact).
        is_pick = (s[None, :] == (row_start + m)[:, None]) & is_row[:, None]  # [BLOCK_T, BLOCK_S]
        slots = tl.sum(tl.where(is_pick, sorted_slots[None, :], 0), axis=1).to(tl.int64)  # [BLOCK_T]
        routing_weight = tl.sum(tl.where(is_pick, sorted_weights[None, :], 0.0), axis=1)  # [BLOCK_T]
        w_rows = weight_ptr + expert * (HIDDEN * INTER) + col_offsets
        w_this = w_ahead
        if IS_PREFETCHED:  # the next expert's first step, issued before this expert's multiply
            after = tl.sum(tl.where(ai == i + 1, experts, 0), axis=0).to(tl.int64)
            w_ahead = tl.load(weight_ptr + after * (HIDDEN * INTER) + col_offsets + k_first[None, :],
                              mask=w_first_mask & (k_first * 0 + i + 1 < num_active)[None, :], other=0.0)
        part = tl.zeros([BLOCK_N, BLOCK_T], dtype=tl.float32)
        for k0 in tl.static_range(0, INTER, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            is_k = ks < INTER
            if IS_PREFETCHED and k0 == 0:
                w = w_this.to(tl.float32)
            else:
                w = tl.load(w_rows + ks[None, :], mask=is_col[:, None] & is_k[None, :], other=0.0).to(tl.float32)
            rows = tl.load(act_ptr + slots[:, None] * INTER + ks[None, :], mask=is_row[:, None] & is_k[None, :],
                           other=0.0).to(tl.float32)
            part += tl.sum(w[:, None, :] * rows[None, :, :], axis=2)  # [BLOCK_N, BLOCK_T]: every token of the expert
        if HAS_BIAS:
            part += tl.load(bias_ptr + expert * HIDDEN + cols, mask=is_col, other=0.0).to(tl.float32)[:, None]
        weighted = round_to(part, dtype) * routing_weight[None, :]  # the expert's rounded output, weighted in fp32
        # One-hot scatter of row m to its token: each (row, token) pair holds one term, so the sum is exact.
        is_token = ((slots // TOP_K)[:, None] == t[None, :]) & is_row[:, None]  # [rows, tokens]
        acc += tl.sum(tl.where(is_token[None, :, :], weighted[:, :, None], 0.0), axis=1)
    tl.store(out_ptr + t.to(tl.int64)[None, :] * stride_out + cols[:, None], acc.to(dtype),
             mask=is_col[:, None] & (t < num_tokens)[None, :])


def expert_down_combine_few(
    act: torch.Tensor,  # [num_tokens * k, inter], by slot
    slot_weights: torch.Tensor,  # [num_tokens * k] fp32, contiguous
    order: ExpertSort,
    down_weight: torch.Tensor,  # [num_experts, hidden, inter] contiguous
    down_bias: torch.Tensor | None,  # [num_experts, hidden]
    num_tokens: int,
    tiles: DownCombineTiles | None = None,
) -> torch.Tensor:  # [num_tokens, hidden] in act's dtype
    check_runnable(down_combine_kernel, act)
    if not 1 <= num_tokens <= FEW_MAX_TOKENS:
        raise ValueError(f"the few-token down + combine takes 1 to {FEW_MAX_TOKENS} tokens, got {num_tokens}")
    num_experts, hidden, inter = down_weight.shape
    top_k = act.shape[0] // num_tokens
    tiles = tiles or default_down_combine_tiles(num_tokens, inter)
    if any(side < 1 or side & (side - 1) for side in (tiles.block_n, tiles.block_k)):
        raise ValueError(f"down + combine tiles must be powers of two, got {tiles}")
    out = torch.empty((num_tokens, hidden), dtype=act.dtype, device=act.device)
    has_bias = down_bias is not None
    down_combine_kernel[(triton.cdiv(hidden, tiles.block_n),)](
        act, down_weight, down_bias if has_bias else act, slot_weights, out,
        order.sorted_slots, order.cu_num_slots_per_expert, order.active_experts, order.num_active_experts,
        num_tokens, out.stride(0),
        HIDDEN=hidden, INTER=inter, TOP_K=top_k, HAS_BIAS=has_bias, BLOCK_N=tiles.block_n,
        BLOCK_K=min(tiles.block_k, max(16, next_pow2(inter))), BLOCK_T=next_pow2(num_tokens),
        BLOCK_A=next_pow2(min(num_experts, num_tokens * top_k)), BLOCK_S=next_pow2(num_tokens * top_k),
        EXPERT_STAGES=tiles.expert_stages, IS_PREFETCHED=tiles.is_prefetched, num_warps=tiles.num_warps,
        **launch_overlap(act),
    )
    return out
