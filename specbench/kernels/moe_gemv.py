"""Routed experts of a mixture-of-experts MLP for decode and verify batches (1 to 64 tokens), laid out as the dense
decode projections of kernels/gemv.py are: every program owns a tile of one expert's weight rows and reads it once.

A decode step at small batch reads each active expert's weights once and does little math, so what costs is how
many bytes are in flight: many programs, each streaming a contiguous weight tile, and no expert's tile read twice.

- gate_up: one program per (tile of intermediate features, active expert) reads the expert's gate and up rows of
  the tile, multiplies them with every token routed to the expert and writes the activation (SiLU-and-mul, or
  gpt-oss's clamped SwiGLU, biases included) of each (token, expert) slot to `act` [num_tokens * k, inter], by slot.
- down: one program per (tile of hidden features, active expert) writes routing weight * (down(act) + bias) of
  each of the expert's slots, fp32, to `partial` [num_tokens * k, hidden]; a small combine kernel adds a token's k
  rows in slot order and rounds once. No atomics: the sum's order is fixed, so every run gives the same bits.
- `is_dot=True` tiles: tensor cores with the weight rows as the MMA's M side and an expert's tokens (sorted by
  expert: kernels/moe_sort.py, padded to BLOCK_M) as its N side.
- `is_dot=False` tiles: the CUDA cores (kernels/moe_cores.py). At one token, gate_up takes its experts straight
  from topk_ids (no sort) and down walks the token's k experts in slot order, so the combine is in its registers
  and there is no third kernel. From two tokens, the grouped layout above, one token of the expert at a time.
- Programs past the batch's active experts exit at once (the grid depends on shapes only: CUDA-graph safe). No
  split-K: tiles of 1 to 64 rows already give over a thousand programs at these shapes.

Padded rows of a CUDA-graph batch come with expert id `num_experts` (specbench/models/moe_routing.py): they belong
to no expert's range, their slots are skipped by the combine, and their outputs are zero.

Roundings follow the eager reference (specbench/models/moe.py): each projection's output (bias included) is rounded
to the input dtype, the activation rounds where torch's ops round, the weighted sum over a token's experts is fp32
and rounded once. In fp32 the kernels differ from it only by the summation orders (the GEMMs', and slot order
instead of ascending expert order over a token's experts). Tiles come from `kernels/moe_tiles.py`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from specbench.kernels.moe_cores import (
    down_grouped_cores_kernel,
    down_one_token_kernel,
    gate_up_grouped_cores_kernel,
    gate_up_one_token_kernel,
)
from specbench.kernels.moe_epilogue import gated_activation, round_to
from specbench.kernels.moe_sort import ExpertSort, sort_by_expert
from specbench.kernels.moe_tiles import TOKEN_BUCKETS, ExpertTiles, ProjectionTiles, default_tiles
from specbench.kernels.pdl import launch_overlap, wait_for_inputs
from specbench.kernels.runtime import check_runnable, is_interpreted, next_pow2

MAX_TOKENS = TOKEN_BUCKETS[-1]  # a decode or verify batch; past it a grouped GEMM with larger tiles pays off
COMBINE_BLOCK = 1024  # hidden features per program of the combine kernel


@triton.jit
def _gate_up_grouped_kernel(
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
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 inputs: the eager fp32 GEMM does not round to TF32
    IS_DOT_UPCAST: tl.constexpr,  # the CPU interpreter's 16-bit dot is unreliable; fp32 sums the same products
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    # Tiles of one expert are neighbours in launch order (program_id(0) runs fastest): consecutive programs stream
    # consecutive rows of the same weight matrix.
    active = tl.program_id(1)
    if active < tl.load(num_active_ptr):
        expert = tl.load(active_ptr + active).to(tl.int64)
        row_start = tl.load(cu_ptr + expert)
        row_end = tl.load(cu_ptr + expert + 1)
        dtype = act_ptr.dtype.element_ty
        cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        is_col = cols < INTER
        gate_rows = weight_ptr + expert * (2 * INTER * HIDDEN) + cols.to(tl.int64)[:, None] * HIDDEN
        for m0 in range(row_start, row_end, BLOCK_M):
            rows = m0 + tl.arange(0, BLOCK_M)
            is_row = rows < row_end
            slots = tl.load(sorted_slots_ptr + rows, mask=is_row, other=0)
            x_rows = x_ptr + (slots // TOP_K).to(tl.int64)[:, None] * stride_x
            acc_gate = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)  # weight rows x the expert's tokens
            acc_up = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
            for k0 in range(0, HIDDEN, BLOCK_K):
                ks = k0 + tl.arange(0, BLOCK_K)
                is_k = ks < HIDDEN
                x = tl.load(x_rows + ks[None, :], mask=is_row[:, None] & is_k[None, :], other=0.0)
                w_mask = is_col[:, None] & is_k[None, :]
                w_gate = tl.load(gate_rows + ks[None, :], mask=w_mask, other=0.0)
                w_up = tl.load(gate_rows + INTER * HIDDEN + ks[None, :], mask=w_mask, other=0.0)
                if IS_DOT_UPCAST:
                    x, w_gate, w_up = x.to(tl.float32), w_gate.to(tl.float32), w_up.to(tl.float32)
                x_t = tl.trans(x)
                acc_gate = tl.dot(w_gate, x_t, acc_gate, input_precision=DOT_PRECISION)
                acc_up = tl.dot(w_up, x_t, acc_up, input_precision=DOT_PRECISION)
            if HAS_BIAS:
                bias_row = bias_ptr + expert * (2 * INTER)
                acc_gate += tl.load(bias_row + cols, mask=is_col, other=0.0).to(tl.float32)[:, None]
                acc_up += tl.load(bias_row + INTER + cols, mask=is_col, other=0.0).to(tl.float32)[:, None]
            result = gated_activation(acc_gate, acc_up, swiglu_alpha, swiglu_limit, dtype, IS_SWIGLU_OAI, PRECISE_EXP)
            tl.store(act_ptr + slots.to(tl.int64)[None, :] * INTER + cols[:, None], result.to(dtype),
                     mask=is_col[:, None] & is_row[None, :])


@triton.jit
def _down_grouped_kernel(
    act_ptr,  # [num_tokens * TOP_K, INTER], by slot
    weight_ptr,  # [num_experts, HIDDEN, INTER]
    bias_ptr,  # [num_experts, HIDDEN] (HAS_BIAS only)
    topk_weights_ptr,  # [num_tokens * TOP_K] fp32, by slot
    partial_ptr,  # [num_tokens * TOP_K, HIDDEN] fp32: routing weight * the expert's rounded output, by slot
    sorted_slots_ptr, cu_ptr, active_ptr, num_active_ptr,  # ExpertSort
    HIDDEN: tl.constexpr,
    INTER: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    IS_DOT_UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    active = tl.program_id(1)
    if active < tl.load(num_active_ptr):
        expert = tl.load(active_ptr + active).to(tl.int64)
        row_start = tl.load(cu_ptr + expert)
        row_end = tl.load(cu_ptr + expert + 1)
        dtype = act_ptr.dtype.element_ty
        cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        is_col = cols < HIDDEN
        w_rows = weight_ptr + expert * (HIDDEN * INTER) + cols.to(tl.int64)[:, None] * INTER
        for m0 in range(row_start, row_end, BLOCK_M):
            rows = m0 + tl.arange(0, BLOCK_M)
            is_row = rows < row_end
            slots = tl.load(sorted_slots_ptr + rows, mask=is_row, other=0).to(tl.int64)
            part = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
            for k0 in range(0, INTER, BLOCK_K):
                ks = k0 + tl.arange(0, BLOCK_K)
                is_k = ks < INTER
                a = tl.load(act_ptr + slots[:, None] * INTER + ks[None, :], mask=is_row[:, None] & is_k[None, :],
                            other=0.0)
                w = tl.load(w_rows + ks[None, :], mask=is_col[:, None] & is_k[None, :], other=0.0)
                if IS_DOT_UPCAST:
                    a, w = a.to(tl.float32), w.to(tl.float32)
                part = tl.dot(w, tl.trans(a), part, input_precision=DOT_PRECISION)
            if HAS_BIAS:
                part += tl.load(bias_ptr + expert * HIDDEN + cols, mask=is_col, other=0.0).to(tl.float32)[:, None]
            routing_weight = tl.load(topk_weights_ptr + slots, mask=is_row, other=0.0)
            weighted = round_to(part, dtype) * routing_weight[None, :]  # the expert's rounded output, weighted in fp32
            tl.store(partial_ptr + slots[None, :] * HIDDEN + cols[:, None], weighted,
                     mask=is_col[:, None] & is_row[None, :])


@triton.jit
def _combine_kernel(
    partial_ptr,  # [num_tokens * TOP_K, HIDDEN] fp32, by slot; rows of padded slots unwritten
    ids_ptr,  # [num_tokens * TOP_K] int64
    out_ptr,  # [num_tokens, HIDDEN]
    stride_out,
    NUM_EXPERTS: tl.constexpr,
    HIDDEN: tl.constexpr,
    TOP_K: tl.constexpr,
    BLOCK: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    token = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for j in tl.static_range(TOP_K):  # slot order, as the one-token down kernel adds
        width = tl.where(tl.load(ids_ptr + token * TOP_K + j) < NUM_EXPERTS, HIDDEN, 0)  # 0: a padded slot
        acc += tl.load(partial_ptr + (token * TOP_K + j) * HIDDEN + cols, mask=cols < width, other=0.0)
    tl.store(out_ptr + token * stride_out + cols, acc.to(out_ptr.dtype.element_ty), mask=cols < HIDDEN)


def is_interpreted_here() -> bool:
    """Whether this process runs the kernels under the CPU interpreter (TRITON_INTERPRET=1 at triton's import)."""
    return is_interpreted(_gate_up_grouped_kernel)


def _check_tiles(tiles: ProjectionTiles, what: str) -> None:
    sides = (tiles.block_n, tiles.block_k) + ((tiles.block_m,) if tiles.is_dot else ())
    if any(side < 1 or side & (side - 1) for side in sides):
        raise ValueError(f"expert {what} tiles must be powers of two, got {tiles}")
    if tiles.is_dot and min(sides) < 16:
        raise ValueError(f"expert {what} tensor-core tiles must be at least 16 a side (tl.dot), got {tiles}")


def _dot_modes(x: torch.Tensor) -> tuple[str, bool]:
    is_upcast = x.dtype != torch.float32 and is_interpreted(_gate_up_grouped_kernel)
    return ("ieee" if x.dtype == torch.float32 or is_upcast else "tf32"), is_upcast


def expert_gate_up(
    x: torch.Tensor,  # [num_tokens, hidden], row stride 1
    topk_ids: torch.Tensor,  # [num_tokens, k] int64; num_experts on padded rows
    order: ExpertSort | None,  # topk_ids sorted by expert (unused at one token on the CUDA cores)
    gate_up_weight: torch.Tensor,  # [num_experts, 2 * inter, hidden] contiguous, rows [gate; up]
    gate_up_bias: torch.Tensor | None,  # [num_experts, 2 * inter]
    tiles: ProjectionTiles,
    *,
    is_swiglu_oai: bool,
    swiglu_alpha: float,
    swiglu_limit: float,
) -> torch.Tensor:  # [num_tokens * k, inter]: each slot's activation; rows of padded slots unwritten
    num_tokens, hidden = x.shape
    num_experts, two_inter, _ = gate_up_weight.shape
    inter, top_k = two_inter // 2, topk_ids.shape[1]
    act = torch.empty((num_tokens * top_k, inter), dtype=x.dtype, device=x.device)
    has_bias = gate_up_bias is not None
    bias = gate_up_bias if has_bias else x  # a placeholder the kernel never reads
    common = {"HIDDEN": hidden, "INTER": inter, "HAS_BIAS": has_bias, "IS_SWIGLU_OAI": is_swiglu_oai,
              "PRECISE_EXP": x.device.type == "cuda", "BLOCK_N": tiles.block_n,
              "BLOCK_K": min(tiles.block_k, max(16, next_pow2(hidden))),
              "num_warps": tiles.num_warps, "num_stages": tiles.num_stages, **launch_overlap(x)}
    num_tiles = triton.cdiv(inter, tiles.block_n)
    if not tiles.is_dot and num_tokens == 1:
        gate_up_one_token_kernel[(num_tiles, top_k)](
            x, topk_ids, gate_up_weight, bias, act, swiglu_alpha, swiglu_limit, NUM_EXPERTS=num_experts, **common)
        return act
    # Programs past the batch's active experts exit at once; the grid depends on shapes only.
    grid = (num_tiles, min(num_experts, num_tokens * top_k))
    sort_args = (order.sorted_slots, order.cu_num_slots_per_expert, order.active_experts, order.num_active_experts)
    if not tiles.is_dot:
        gate_up_grouped_cores_kernel[grid](
            x, gate_up_weight, bias, act, *sort_args, x.stride(0), swiglu_alpha, swiglu_limit, TOP_K=top_k, **common)
        return act
    precision, is_upcast = _dot_modes(x)
    _gate_up_grouped_kernel[grid](
        x, gate_up_weight, bias, act, *sort_args, x.stride(0), swiglu_alpha, swiglu_limit,
        TOP_K=top_k, DOT_PRECISION=precision, IS_DOT_UPCAST=is_upcast, BLOCK_M=tiles.block_m, **common)
    return act


def expert_down_combine(
    act: torch.Tensor,  # [num_tokens * k, inter], by slot (expert_gate_up)
    topk_ids: torch.Tensor,  # [num_tokens, k] int64; num_experts on padded rows
    slot_weights: torch.Tensor,  # [num_tokens * k] fp32, contiguous
    order: ExpertSort | None,  # unused at one token on the CUDA cores
    down_weight: torch.Tensor,  # [num_experts, hidden, inter] contiguous
    down_bias: torch.Tensor | None,  # [num_experts, hidden]
    tiles: ProjectionTiles,
) -> torch.Tensor:  # [num_tokens, hidden] in act's dtype
    num_experts, hidden, inter = down_weight.shape
    num_tokens, top_k = topk_ids.shape
    out = torch.empty((num_tokens, hidden), dtype=act.dtype, device=act.device)
    has_bias = down_bias is not None
    bias = down_bias if has_bias else act
    common = {"HIDDEN": hidden, "INTER": inter, "HAS_BIAS": has_bias, "BLOCK_N": tiles.block_n,
              "BLOCK_K": min(tiles.block_k, max(16, next_pow2(inter))),
              "num_warps": tiles.num_warps, "num_stages": tiles.num_stages, **launch_overlap(act)}
    num_tiles = triton.cdiv(hidden, tiles.block_n)
    if not tiles.is_dot and num_tokens == 1:
        down_one_token_kernel[(num_tiles,)](
            act, topk_ids, slot_weights, down_weight, bias, out, NUM_EXPERTS=num_experts, TOP_K=top_k, **common)
        return out
    # Every real slot's row is written by its expert's programs; padded slots' rows stay unwritten and unread.
    partial = torch.empty((num_tokens * top_k, hidden), dtype=torch.float32, device=act.device)
    grid = (num_tiles, min(num_experts, num_tokens * top_k))
    sort_args = (order.sorted_slots, order.cu_num_slots_per_expert, order.active_experts, order.num_active_experts)
    if not tiles.is_dot:
        down_grouped_cores_kernel[grid](act, down_weight, bias, slot_weights, partial, *sort_args, **common)
    else:
        precision, is_upcast = _dot_modes(act)
        _down_grouped_kernel[grid](
            act, down_weight, bias, slot_weights, partial, *sort_args,
            DOT_PRECISION=precision, IS_DOT_UPCAST=is_upcast, BLOCK_M=tiles.block_m, **common)
    _combine_kernel[(num_tokens, triton.cdiv(hidden, COMBINE_BLOCK))](
        partial, topk_ids, out, out.stride(0), NUM_EXPERTS=num_experts, HIDDEN=hidden, TOP_K=top_k,
        BLOCK=COMBINE_BLOCK, num_warps=4, **launch_overlap(partial))
    return out


def expert_gemv(
    x: torch.Tensor,  # [num_tokens, hidden], num_tokens <= MAX_TOKENS
    topk_ids: torch.Tensor,  # [num_tokens, k] int64; num_experts on padded rows
    topk_weights: torch.Tensor,  # [num_tokens, k] fp32; zero on padded rows
    gate_up_weight: torch.Tensor,  # [num_experts, 2 * inter, hidden] contiguous, rows [gate; up]
    down_weight: torch.Tensor,  # [num_experts, hidden, inter] contiguous
    *,
    gate_up_bias: torch.Tensor | None = None,  # [num_experts, 2 * inter]
    down_bias: torch.Tensor | None = None,  # [num_experts, hidden]
    is_swiglu_oai: bool = False,  # gpt-oss's clamped activation instead of silu(gate) * up
    swiglu_alpha: float = 1.702,
    swiglu_limit: float = 7.0,
    tiles: ExpertTiles | None = None,  # default: kernels/moe_tiles.default_tiles for this shape and batch
    order: ExpertSort | None = None,  # topk_ids sorted by expert, if already made (kernels/moe_route.py)
) -> torch.Tensor:  # [num_tokens, hidden] in x's dtype: sum over k of weight * expert(x); zero on padded rows
    """The routed experts of a decode or verify batch: gate_up + activation, then down + weighted combine."""
    check_runnable(_gate_up_grouped_kernel, x)
    num_tokens, hidden = x.shape
    num_experts, two_inter, _ = gate_up_weight.shape
    inter = two_inter // 2
    if num_tokens > MAX_TOKENS:
        raise ValueError(f"expert_gemv takes at most {MAX_TOKENS} tokens, got {num_tokens}")
    if tuple(gate_up_weight.shape[1:]) != (2 * inter, hidden) or tuple(down_weight.shape) != (num_experts, hidden,
                                                                                                inter):
        raise ValueError(f"expert weights {tuple(gate_up_weight.shape)} / {tuple(down_weight.shape)} are not "
                         f"[{num_experts}, 2 * inter, {hidden}] / [{num_experts}, {hidden}, inter]")
    if not (gate_up_weight.is_contiguous() and down_weight.is_contiguous()):
        raise ValueError("expert_gemv needs contiguous expert weights")
    if (gate_up_bias is None) != (down_bias is None):
        raise ValueError("expert_gemv takes both expert biases or neither")
    if tuple(topk_ids.shape) != tuple(topk_weights.shape) or topk_ids.shape[0] != num_tokens:
        raise ValueError(f"routing {tuple(topk_ids.shape)} / {tuple(topk_weights.shape)} is not [{num_tokens}, k]")
    if num_tokens == 0:
        return torch.empty((0, hidden), dtype=x.dtype, device=x.device)
    tiles = tiles or default_tiles(num_tokens, hidden, inter, x.element_size())
    _check_tiles(tiles.gate_up, "gate_up")
    _check_tiles(tiles.down, "down")
    if x.stride(-1) != 1:
        x = x.contiguous()
    topk_ids = topk_ids.contiguous()
    if order is None and (num_tokens > 1 or tiles.gate_up.is_dot or tiles.down.is_dot):
        order = sort_by_expert(topk_ids, num_experts)
    act = expert_gate_up(x, topk_ids, order, gate_up_weight, gate_up_bias, tiles.gate_up,
                         is_swiglu_oai=is_swiglu_oai, swiglu_alpha=swiglu_alpha, swiglu_limit=swiglu_limit)
    slot_weights = topk_weights.reshape(-1).float().contiguous()
    return expert_down_combine(act, topk_ids, slot_weights, order, down_weight, down_bias, tiles.down)
