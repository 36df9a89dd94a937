"""Top-k routing and the sort by expert of a decode or verify batch in one single-program kernel: the router's fp32
logits in; each token's experts and weights and the ExpertSort of kernels/moe_sort.py out. `router_logits` makes
those logits in one kernel too; `router_route_sort` does both in one launch (the fused MoE layer's routing: at one
token each launch costs more than the math).

The torch path (specbench/models/moe_routing.py `route`, then `sort_by_expert_reference`) is the definition; it costs
about twenty small kernels a layer, which at one token per step take longer than reading the layer's experts.

Same choices as the definition:
- softmax scoring picks the top k of the logits (softmax is monotonic, so the same experts as the top k of the
  probabilities), weights are the probabilities, renormalised over the k when `norm_topk_prob`;
- sigmoid scoring picks the top k of sigmoid(logits) + the correction bias, weights are the sigmoids, renormalised
  with the definition's epsilon;
- topk_softmax picks the top k of the logits and softmaxes over those k;
- then the routed scaling factor; padded rows (is_real_token False) get the sentinel id num_experts and weight 0.
Experts come out in descending score order, as torch.topk returns them; an exact tie goes to the lower expert id
(+0.0 and -0.0 tie), a NaN score ranks below -inf.
The weights differ from the definition's by the rounding of exp and division only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from specbench.kernels.moe_sort import ExpertSort, empty_expert_sort, sort_blocks, write_expert_sort
from specbench.kernels.pdl import launch_overlap, wait_for_inputs
from specbench.kernels.runtime import check_runnable, is_interpreted, next_pow2

SCORING_IDS = {"softmax": 0, "sigmoid": 1, "topk_softmax": 2}  # specbench/models/moe_config.py SCORINGS


@triton.jit
def _exp(x, PRECISE_EXP: tl.constexpr):
    # libdevice has no interpreter implementation: numpy's exp stands in on CPU.
    if PRECISE_EXP:
        return libdevice.exp(x)
    else:
        return tl.exp(x)


@triton.jit
def _route_tile(
    logits,  # [BLOCK_T, BLOCK_E] fp32 tile, router bias included; any value past num_tokens / NUM_EXPERTS
    correction_bias_ptr, is_real_ptr, ids_ptr, weights_ptr, sorted_slots_ptr, cu_ptr, active_ptr, num_active_ptr,
    num_tokens, routed_scaling_factor,
    NUM_EXPERTS: tl.constexpr, TOP_K: tl.constexpr, SCORING: tl.constexpr, NORM_TOPK: tl.constexpr,
    HAS_CORRECTION_BIAS: tl.constexpr, HAS_IS_REAL: tl.constexpr, PRECISE_EXP: tl.constexpr,
    BLOCK_T: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """Top-k, weights, the padding mask and the sort of one batch's logits (the body of both routing kernels)."""
    t = tl.arange(0, BLOCK_T)
    e = tl.arange(0, BLOCK_E)
    kk = tl.arange(0, BLOCK_K)
    is_t = t < num_tokens
    is_e = e < NUM_EXPERTS
    # Rows past num_tokens read as zeros (no NaN from an all -inf row); experts past NUM_EXPERTS as -inf.
    logits = tl.where(is_t[:, None] & is_e[None, :], logits, 0.0)
    logits = tl.where(is_e[None, :], logits, float("-inf"))
    if SCORING == 0:
        top = tl.max(logits, axis=1)
        ex = tl.where(is_e[None, :], _exp(logits - top[:, None], PRECISE_EXP), 0.0)
        total = tl.sum(ex, axis=1)  # the probabilities are ex / total: a chosen one's is made from its logit below
        scores = logits
        choice = logits
    elif SCORING == 1:
        scores = tl.math.div_rn(1.0, 1.0 + _exp(-logits, PRECISE_EXP))
        choice = scores
        if HAS_CORRECTION_BIAS:
            choice = scores + tl.load(correction_bias_ptr + e, mask=is_e, other=0.0)[None, :]
    else:
        scores = logits
        choice = logits
    # Each pick is one max over packed keys: the score's bits, order-preserving, above the complement of the expert id,
    # so the max is the best score and, among exact ties, the lowest id. -0.0 counts as +0.0 (they compare equal);
    # NaN scores (a broken row) rank last, below -inf.
    choice = tl.where(choice == 0.0, 0.0, choice)
    bits = choice.to(tl.int32, bitcast=True).to(tl.int64)
    ordered = tl.where(bits < 0, -bits - 1, bits + 2147483648)  # [0, 2^32): float order as integers; 0 decodes to NaN
    ordered = tl.where(choice == choice, ordered, 0)  # noqa: PLR0124
    is_free = is_e[None, :] & is_t[:, None]  # [t, e]: a candidate
    keys = tl.where(is_free, ordered * BLOCK_E + (BLOCK_E - 1 - e)[None, :], -1)  # [t, e] int64; -1: not a candidate
    ids = tl.full([BLOCK_T, BLOCK_K], NUM_EXPERTS, dtype=tl.int32)
    weights = tl.zeros([BLOCK_T, BLOCK_K], dtype=tl.float32)
    for j in tl.static_range(TOP_K):
        best = tl.max(keys, axis=1)  # [t]
        pick = (BLOCK_E - 1 - best % BLOCK_E).to(tl.int32)
        pick = tl.where(is_t & (best >= 0), pick, NUM_EXPERTS)
        is_pick = e[None, :] == pick[:, None]
        keys = tl.where(is_pick, -1, keys)
        if SCORING == 1 and HAS_CORRECTION_BIAS:  # the chosen score is not the weight: gather it
            w = tl.sum(tl.where(is_pick, scores, 0.0), axis=1)
        else:  # the weight follows from the chosen score: the tile's arithmetic on the same value, the same bits
            best_ordered = best // BLOCK_E
            value = tl.where(best_ordered >= 2147483648, best_ordered - 2147483648, -best_ordered - 1)
            value = value.to(tl.int32).to(tl.float32, bitcast=True)
            if SCORING == 0:
                w = tl.math.div_rn(_exp(value - top, PRECISE_EXP), total)
            else:
                w = value
            w = tl.where(is_t & (best >= 0), w, 0.0)
        ids = tl.where(kk[None, :] == j, pick[:, None], ids)
        weights = tl.where(kk[None, :] == j, w[:, None], weights)
    is_k = kk < TOP_K
    if SCORING == 2:
        top = tl.max(tl.where(is_k[None, :], weights, float("-inf")), axis=1)
        ex = tl.where(is_k[None, :], _exp(weights - top[:, None], PRECISE_EXP), 0.0)
        weights = tl.math.div_rn(ex, tl.sum(ex, axis=1)[:, None])
    elif NORM_TOPK:
        total = tl.sum(tl.where(is_k[None, :], weights, 0.0), axis=1)
        if SCORING == 1:
            total = total + 1e-20  # sigmoid scores can all be tiny (as the definition)
        weights = tl.math.div_rn(weights, total[:, None])
    weights = weights * routed_scaling_factor
    if HAS_IS_REAL:
        is_real = tl.load(is_real_ptr + t, mask=is_t, other=0) != 0
        ids = tl.where(is_real[:, None], ids, NUM_EXPERTS)
        weights = tl.where(is_real[:, None], weights, 0.0)
    out_mask = is_t[:, None] & is_k[None, :]
    tl.store(ids_ptr + t[:, None] * TOP_K + kk[None, :], ids.to(tl.int64), mask=out_mask)
    tl.store(weights_ptr + t[:, None] * TOP_K + kk[None, :], weights, mask=out_mask)
    write_expert_sort(ids, num_tokens, sorted_slots_ptr, cu_ptr, active_ptr, num_active_ptr,
                      NUM_EXPERTS, TOP_K, BLOCK_T, BLOCK_E, BLOCK_K)


@triton.jit
def _route_sort_kernel(
    logits_ptr,  # [num_tokens, NUM_EXPERTS] fp32, router bias included
    correction_bias_ptr,  # [NUM_EXPERTS] fp32 (HAS_CORRECTION_BIAS only)
    is_real_ptr,  # [num_tokens] bool (HAS_IS_REAL only)
    ids_ptr,  # [num_tokens, TOP_K] int64, written
    weights_ptr,  # [num_tokens, TOP_K] fp32, written
    sorted_slots_ptr, cu_ptr, active_ptr, num_active_ptr,  # ExpertSort, written
    num_tokens, stride_logits, routed_scaling_factor,
    NUM_EXPERTS: tl.constexpr,
    TOP_K: tl.constexpr,
    SCORING: tl.constexpr,  # SCORING_IDS
    NORM_TOPK: tl.constexpr,
    HAS_CORRECTION_BIAS: tl.constexpr,
    HAS_IS_REAL: tl.constexpr,
    PRECISE_EXP: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_K: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    t = tl.arange(0, BLOCK_T)
    e = tl.arange(0, BLOCK_E)
    logits = tl.load(logits_ptr + t[:, None] * stride_logits + e[None, :],
                     mask=(t < num_tokens)[:, None] & (e < NUM_EXPERTS)[None, :], other=0.0)
    _route_tile(logits, correction_bias_ptr, is_real_ptr, ids_ptr, weights_ptr, sorted_slots_ptr, cu_ptr,
                active_ptr, num_active_ptr, num_tokens, routed_scaling_factor, NUM_EXPERTS, TOP_K, SCORING,
                NORM_TOPK, HAS_CORRECTION_BIAS, HAS_IS_REAL, PRECISE_EXP, BLOCK_T, BLOCK_E, BLOCK_K)


@triton.jit
def _router_kernel(
    x_ptr,  # [num_tokens, HIDDEN]
    weight_ptr,  # [NUM_EXPERTS, HIDDEN], x's dtype
    bias_ptr,  # [NUM_EXPERTS] (HAS_BIAS only)
    out_ptr,  # [num_tokens, NUM_EXPERTS] fp32
    num_tokens, stride_x,
    NUM_EXPERTS: tl.constexpr,
    HIDDEN: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    IS_DOT_UPCAST: tl.constexpr,  # the CPU interpreter's 16-bit dot is unreliable; fp32 sums the same products
    BLOCK_T: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_K: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    # 16-bit inputs: exact products summed in fp32 (tensor cores), as the fp32 GEMM of the upcast inputs up to the
    # order of the sum; the logits are never rounded to 16 bits.
    experts = tl.program_id(0) * BLOCK_E + tl.arange(0, BLOCK_E)
    is_e = experts < NUM_EXPERTS
    t = tl.arange(0, BLOCK_T)
    is_t = t < num_tokens
    acc = tl.zeros([BLOCK_T, BLOCK_E], dtype=tl.float32)
    for k0 in range(0, HIDDEN, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        is_k = ks < HIDDEN
        x = tl.load(x_ptr + t.to(tl.int64)[:, None] * stride_x + ks[None, :], mask=is_t[:, None] & is_k[None, :],
                    other=0.0)
        w = tl.load(weight_ptr + experts.to(tl.int64)[:, None] * HIDDEN + ks[None, :],
                    mask=is_e[:, None] & is_k[None, :], other=0.0)
        if IS_DOT_UPCAST:
            x, w = x.to(tl.float32), w.to(tl.float32)
        acc = tl.dot(x, tl.trans(w), acc, input_precision=DOT_PRECISION)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + experts, mask=is_e, other=0.0).to(tl.float32)[None, :]
    tl.store(out_ptr + t[:, None] * NUM_EXPERTS + experts[None, :], acc, mask=is_t[:, None] & is_e[None, :])


def router_logits(
    x: torch.Tensor,  # [num_tokens, hidden], num_tokens <= 64
    weight: torch.Tensor,  # [num_experts, hidden] contiguous, x's dtype
    bias: torch.Tensor | None,  # [num_experts]
) -> torch.Tensor:  # [num_tokens, num_experts] fp32
    """The router GEMM in one kernel (the torch path casts x and the weight to fp32 first: three)."""
    check_runnable(_router_kernel, x)
    num_tokens, hidden = x.shape
    num_experts = weight.shape[0]
    if weight.dtype != x.dtype or not weight.is_contiguous() or x.stride(-1) != 1:
        raise ValueError("router_logits takes a contiguous router weight of x's dtype and row-major x")
    out = torch.empty((num_tokens, num_experts), dtype=torch.float32, device=x.device)
    if num_tokens == 0:
        return out
    is_upcast = x.dtype != torch.float32 and is_interpreted(_router_kernel)
    block_e = 16
    _router_kernel[(triton.cdiv(num_experts, block_e),)](
        x, weight, weight if bias is None else bias, out, num_tokens, x.stride(0),
        NUM_EXPERTS=num_experts, HIDDEN=hidden, HAS_BIAS=bias is not None,
        DOT_PRECISION="ieee" if x.dtype == torch.float32 or is_upcast else "tf32", IS_DOT_UPCAST=is_upcast,
        BLOCK_T=max(16, next_pow2(num_tokens)), BLOCK_E=block_e, BLOCK_K=min(128, max(16, next_pow2(hidden))),
        num_warps=4, num_stages=3, **launch_overlap(x),
    )
    return out


def route_and_sort(
    router_logits: torch.Tensor,  # [num_tokens, num_experts] fp32, router bias included
    *,
    top_k: int,
    scoring: str,
    norm_topk_prob: bool,
    routed_scaling_factor: float,
    correction_bias: torch.Tensor | None,  # [num_experts] fp32, selection only
    is_real_token: torch.Tensor | None,  # [num_tokens] bool; None: every row is real
) -> tuple[torch.Tensor, torch.Tensor, ExpertSort]:  # topk_ids [num_tokens, k] int64, topk_weights fp32, the sort
    check_runnable(_route_sort_kernel, router_logits)
    if scoring not in SCORING_IDS:
        raise ValueError(f"unknown MoE scoring {scoring!r}; supported: {', '.join(SCORING_IDS)}")
    if router_logits.dtype != torch.float32 or router_logits.stride(-1) != 1:
        raise ValueError("route_and_sort takes row-major fp32 router logits")
    num_tokens, num_experts = router_logits.shape
    device = router_logits.device
    topk_ids = torch.empty((num_tokens, top_k), dtype=torch.int64, device=device)
    topk_weights = torch.empty((num_tokens, top_k), dtype=torch.float32, device=device)
    order = empty_expert_sort(num_tokens * top_k, num_experts, device)
    if num_tokens == 0:
        return topk_ids, topk_weights, order
    _route_sort_kernel[(1,)](
        router_logits, router_logits if correction_bias is None else correction_bias,
        router_logits if is_real_token is None else is_real_token, topk_ids, topk_weights,
        order.sorted_slots, order.cu_num_slots_per_expert, order.active_experts, order.num_active_experts,
        num_tokens, router_logits.stride(0), float(routed_scaling_factor),
        NUM_EXPERTS=num_experts, TOP_K=top_k, SCORING=SCORING_IDS[scoring], NORM_TOPK=norm_topk_prob,
        HAS_CORRECTION_BIAS=correction_bias is not None, HAS_IS_REAL=is_real_token is not None,
        PRECISE_EXP=device.type == "cuda", **sort_blocks(num_tokens, num_experts, top_k),
        **launch_overlap(router_logits),
    )
    return topk_ids, topk_weights, order


@triton.jit
def _norm_prologue(
    x,  # [BLOCK_TP, BLOCK_H] this program's columns ks of x
    x_ptr, residual_ptr, norm_weight_ptr, normed_ptr, stream_ptr,
    tp, is_tp, ks, is_k, num_tokens, stride_x, eps, is_writer,
    HIDDEN: tl.constexpr, HAS_RESIDUAL: tl.constexpr, IS_OFFSET: tl.constexpr,
    BLOCK_TP: tl.constexpr, BLOCK_H: tl.constexpr,
):
    """RMSNorm(x [+ residual]) of this program's columns, rounded as kernels/rms_norm.py rounds; the RMS from a pass
    over the whole rows (from L2: every program of the grid reads them). `is_writer`: this program stores its
    columns of the normed rows (and of the sum), so the programs of one expert block write each column once."""
    dtype = x_ptr.dtype.element_ty
    rows = tp.to(tl.int64)[:, None]
    if HAS_RESIDUAL:
        residual = tl.load(residual_ptr + rows * HIDDEN + ks[None, :], mask=is_tp[:, None] & is_k[None, :], other=0.0)
        x = (x.to(tl.float32) + residual.to(tl.float32)).to(dtype)
    sum_sq = tl.zeros([BLOCK_TP], dtype=tl.float32)
    for k0 in tl.static_range(0, HIDDEN, BLOCK_H):
        cols = k0 + tl.arange(0, BLOCK_H)
        mask = is_tp[:, None] & (cols < HIDDEN)[None, :]
        row = tl.load(x_ptr + rows * stride_x + cols[None, :], mask=mask, other=0.0)
        if HAS_RESIDUAL:
            row = (row.to(tl.float32) + tl.load(residual_ptr + rows * HIDDEN + cols[None, :], mask=mask,
                                                other=0.0).to(tl.float32)).to(dtype)
        row = row.to(tl.float32)
        sum_sq += tl.sum(row * row, axis=1)
    inv_rms = tl.math.rsqrt(tl.math.div_rn(sum_sq, HIDDEN * 1.0) + eps)
    weight = tl.load(norm_weight_ptr + ks, mask=is_k, other=0.0).to(tl.float32)
    x32 = x.to(tl.float32)
    if IS_OFFSET:
        normed = ((1.0 + weight)[None, :] * (x32 * inv_rms[:, None])).to(dtype)
    else:
        normed = (weight[None, :] * (x32 * inv_rms[:, None]).to(dtype).to(tl.float32)).to(dtype)
    if is_writer:
        out_mask = is_tp[:, None] & is_k[None, :]
        tl.store(normed_ptr + rows * HIDDEN + ks[None, :], normed, mask=out_mask)
        if HAS_RESIDUAL:
            tl.store(stream_ptr + rows * HIDDEN + ks[None, :], x, mask=out_mask)
    return normed


@triton.jit
def _router_route_sort_kernel(
    x_ptr,  # [num_tokens, HIDDEN]
    weight_ptr,  # [NUM_EXPERTS, HIDDEN], x's dtype
    bias_ptr,  # [NUM_EXPERTS] (HAS_BIAS only)
    partial_ptr,  # [NUM_SPLITS, num_tokens, NUM_EXPERTS] fp32 scratch: each program's partial logits
    counter_ptr,  # [1] int32, zero between launches: programs done with their partial logits
    correction_bias_ptr, is_real_ptr, ids_ptr, weights_ptr, sorted_slots_ptr, cu_ptr, active_ptr,
    num_active_ptr,  # as _route_sort_kernel's
    num_tokens, stride_x, routed_scaling_factor,
    NUM_EXPERTS: tl.constexpr,
    HIDDEN: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    IS_DOT_UPCAST: tl.constexpr,
    TOP_K: tl.constexpr,
    SCORING: tl.constexpr,
    NORM_TOPK: tl.constexpr,
    HAS_CORRECTION_BIAS: tl.constexpr,
    HAS_IS_REAL: tl.constexpr,
    PRECISE_EXP: tl.constexpr,
    NUM_SPLITS: tl.constexpr,  # programs along the hidden width, BLOCK_H columns each
    BLOCK_H: tl.constexpr,
    BLOCK_EP: tl.constexpr,  # experts per program of the router GEMM
    BLOCK_TP: tl.constexpr,  # tokens of the router GEMM's tile (at least 16: tensor cores)
    BLOCK_T: tl.constexpr,  # tokens of the routing tile (>= num_tokens)
    BLOCK_E: tl.constexpr,  # >= NUM_EXPERTS
    BLOCK_K: tl.constexpr,  # >= TOP_K
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
    # RouterNorm: the router reads RMSNorm(x [+ residual]); the first expert block's programs write it (and the sum)
    norm_weight_ptr,  # [HIDDEN] (HAS_NORM only)
    residual_ptr,  # [num_tokens, HIDDEN] row-major (HAS_RESIDUAL only)
    normed_ptr,  # [num_tokens, HIDDEN] row-major, written (HAS_NORM only)
    stream_ptr,  # [num_tokens, HIDDEN] row-major, written: x + residual (HAS_RESIDUAL only)
    eps,
    HAS_NORM: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    IS_OFFSET: tl.constexpr,  # (1 + weight) in fp32, rounded once; else Llama's two roundings
):
    wait_for_inputs(USE_PDL)
    # Phase 1, every program: the partial logits of BLOCK_EP experts over BLOCK_H columns of the hidden width (the
    # router's 16-bit products summed in fp32 on the tensor cores), to the scratch buffer.
    experts = tl.program_id(0) * BLOCK_EP + tl.arange(0, BLOCK_EP)
    split = tl.program_id(1)
    is_ep = experts < NUM_EXPERTS
    tp = tl.arange(0, BLOCK_TP)
    is_tp = tp < num_tokens
    ks = split * BLOCK_H + tl.arange(0, BLOCK_H)
    is_k = ks < HIDDEN
    x = tl.load(x_ptr + tp.to(tl.int64)[:, None] * stride_x + ks[None, :], mask=is_tp[:, None] & is_k[None, :],
                other=0.0)
    if HAS_NORM:
        x = _norm_prologue(x, x_ptr, residual_ptr, norm_weight_ptr, normed_ptr, stream_ptr, tp, is_tp, ks, is_k,
                           num_tokens, stride_x, eps, tl.program_id(0) == 0, HIDDEN, HAS_RESIDUAL, IS_OFFSET,
                           BLOCK_TP, BLOCK_H)
    w = tl.load(weight_ptr + experts.to(tl.int64)[:, None] * HIDDEN + ks[None, :],
                mask=is_ep[:, None] & is_k[None, :], other=0.0)
    if IS_DOT_UPCAST:
        x, w = x.to(tl.float32), w.to(tl.float32)
    acc = tl.dot(x, tl.trans(w), input_precision=DOT_PRECISION)  # [BLOCK_TP, BLOCK_EP]
    tl.store(partial_ptr + (split * num_tokens + tp[:, None]) * NUM_EXPERTS + experts[None, :], acc,
             mask=is_tp[:, None] & is_ep[None, :])
    # Phase 2, the last program to finish phase 1 alone: sum the partials (in split order: the same logits on every
    # run), add the bias, route and sort. The barrier makes every thread's stores precede the release; the last
    # program reads the others' partials past L1 (.cg) after its acquire.
    tl.debug_barrier()
    num_programs = tl.num_programs(0) * tl.num_programs(1)
    num_done = tl.atomic_add(counter_ptr, 1, sem="acq_rel")
    if num_done == num_programs - 1:
        t = tl.arange(0, BLOCK_T)
        e = tl.arange(0, BLOCK_E)
        mask = (t < num_tokens)[:, None] & (e < NUM_EXPERTS)[None, :]
        logits = tl.zeros([BLOCK_T, BLOCK_E], dtype=tl.float32)
        for s in tl.static_range(NUM_SPLITS):
            logits += tl.load(partial_ptr + (s * num_tokens + t[:, None]) * NUM_EXPERTS + e[None, :], mask=mask,
                              other=0.0, cache_modifier=".cg")
        if HAS_BIAS:
            logits += tl.load(bias_ptr + e, mask=e < NUM_EXPERTS, other=0.0).to(tl.float32)[None, :]
        _route_tile(logits, correction_bias_ptr, is_real_ptr, ids_ptr, weights_ptr, sorted_slots_ptr, cu_ptr,
                    active_ptr, num_active_ptr, num_tokens, routed_scaling_factor, NUM_EXPERTS, TOP_K, SCORING,
                    NORM_TOPK, HAS_CORRECTION_BIAS, HAS_IS_REAL, PRECISE_EXP, BLOCK_T, BLOCK_E, BLOCK_K)
        tl.store(counter_ptr, 0)  # for the next launch (a CUDA graph replays this one)


@dataclass(frozen=True)
class RouterNorm:
    """The MoE layer's RMSNorm (after the residual add, if any) in the routing kernel's prologue: the router reads
    the normed rows and the kernel writes them for the experts, one launch fewer (two with the add). Rounded as
    kernels/rms_norm.py rounds; the RMS's fp32 sum runs in another order."""

    weight: torch.Tensor  # [hidden]
    eps: float
    is_offset: bool  # (1 + weight) in fp32, rounded once (layers.OffsetRMSNorm); else Llama's two roundings
    normed: torch.Tensor  # [num_tokens, hidden] row-major, x's dtype: written, RMSNorm(x [+ residual])
    residual: torch.Tensor | None = None  # [num_tokens, hidden] row-major: normalise x + residual
    stream: torch.Tensor | None = None  # [num_tokens, hidden] row-major: written, x + residual (with residual)


def new_router_norm(
    norm,  # layers.RMSNorm or OffsetRMSNorm (weight, eps, is_offset)
    x: torch.Tensor,  # [num_tokens, hidden]
    residual: torch.Tensor | None,  # [num_tokens, hidden]
) -> RouterNorm:
    """A RouterNorm of `norm` with fresh output rows for x."""
    return RouterNorm(weight=norm.weight, eps=norm.eps, is_offset=norm.is_offset, normed=torch.empty_like(x),
                      residual=None if residual is None else residual.contiguous(),
                      stream=None if residual is None else torch.empty_like(x))


def _check_norm(norm: RouterNorm, x: torch.Tensor) -> None:
    rows = [norm.normed] + ([] if norm.residual is None else [norm.residual, norm.stream])
    if (tuple(norm.weight.shape) != (x.shape[1],) or (norm.residual is None) != (norm.stream is None)
            or any(r.shape != x.shape or r.dtype != x.dtype or not r.is_contiguous() for r in rows)):
        raise ValueError("router_route_sort's norm needs a [hidden] weight and row-major [num_tokens, hidden] rows "
                         "of x's dtype (residual and stream together)")


@dataclass(frozen=True)
class RouterTiles:
    block_h: int  # hidden columns per program of the router GEMM (the programs' split of the width)
    block_e: int  # experts per program of the router GEMM (at least 16: tensor cores)
    num_warps: int = 0  # 0: routing_warps (from the routing tile's size)


def routing_warps(block_t: int, block_e: int) -> int:
    """Warps of the fused routing kernel, for its phase 2 (top-k and the sort over a [tokens, experts] tile): one
    warp at one token and up to 128 experts, whose reductions then need no shared memory; else 4 to 16 warps, about
    8 tile elements a thread at 256 experts and more, 16 below. H100 (scripts/bench_moe_router.py): session 22, one
    warp gave 13.4 us at 4 tokens x 128 experts against 7.4 with 4, and 13.8 us at one token x 512 experts against
    12.2; session 24 (packed top-k keys), 4 tokens x 512 experts 28.9 us with 4 warps against 19.0 with 8, 16 tokens
    x 512 123.7 us with 4, 67.3 with 8, 44.4 with 16; 4 tokens x 128 experts 7.4 with 4 against 9.2 with 8 (narrower
    tiles past 4 tokens were not timed with the packed keys: they keep session 22's 16 a thread)."""
    if block_t == 1 and block_e <= 128:
        return 1
    elements_per_thread = 8 if block_e >= 256 else 16
    return min(16, max(4, block_t * block_e // (32 * elements_per_thread)))


def default_router_tiles(hidden: int, element_size: int) -> RouterTiles:
    """The router weight is read by many small programs at once: a 2048 x 128 bf16 router (0.5 MB) in 64 programs
    of 8 KB, so its latency is one load's rather than a K loop's."""
    return RouterTiles(block_h=min(next_pow2(hidden), 512 // element_size), block_e=16)


def router_route_sort(
    x: torch.Tensor,  # [num_tokens, hidden], num_tokens <= 64
    weight: torch.Tensor,  # [num_experts, hidden] contiguous, x's dtype
    bias: torch.Tensor | None,  # [num_experts]
    counter: torch.Tensor,  # [1] int32 zeros, this layer's own (RoutingCounter): the kernel leaves it at zero
    *,
    top_k: int,
    scoring: str,
    norm_topk_prob: bool,
    routed_scaling_factor: float,
    correction_bias: torch.Tensor | None,  # [num_experts] fp32, selection only
    is_real_token: torch.Tensor | None,  # [num_tokens] bool; None: every row is real
    tiles: RouterTiles | None = None,
    norm: RouterNorm | None = None,  # x is the norm's input: route RMSNorm(x [+ residual]), written to norm.normed
) -> tuple[torch.Tensor, torch.Tensor, ExpertSort]:  # as route_and_sort's
    """`router_logits` then `route_and_sort` in one launch: the programs of the router GEMM each write partial
    logits, and the last one to finish routes and sorts the batch (no host sync: CUDA-graph safe). The same experts
    and weights as the two kernels up to the order of the logits' fp32 sum. With `norm`, the layer's RMSNorm rides
    in the GEMM's prologue (RouterNorm)."""
    check_runnable(_router_route_sort_kernel, x)
    if scoring not in SCORING_IDS:
        raise ValueError(f"unknown MoE scoring {scoring!r}; supported: {', '.join(SCORING_IDS)}")
    num_tokens, hidden = x.shape
    num_experts = weight.shape[0]
    if weight.dtype != x.dtype or not weight.is_contiguous() or x.stride(-1) != 1 or weight.shape[1] != hidden:
        raise ValueError("router_route_sort takes a contiguous [num_experts, hidden] router weight of x's dtype "
                         "and row-major x")
    if counter.dtype != torch.int32 or counter.numel() != 1 or counter.device != x.device:
        raise ValueError("router_route_sort needs a one-element int32 counter on x's device")
    if norm is not None:
        _check_norm(norm, x)
    device = x.device
    topk_ids = torch.empty((num_tokens, top_k), dtype=torch.int64, device=device)
    topk_weights = torch.empty((num_tokens, top_k), dtype=torch.float32, device=device)
    order = empty_expert_sort(num_tokens * top_k, num_experts, device)
    if num_tokens == 0:
        return topk_ids, topk_weights, order
    tiles = tiles or default_router_tiles(hidden, x.element_size())
    num_splits = triton.cdiv(hidden, tiles.block_h)
    partial = torch.empty((num_splits, num_tokens, num_experts), dtype=torch.float32, device=device)
    is_upcast = x.dtype != torch.float32 and is_interpreted(_router_route_sort_kernel)
    blocks = sort_blocks(num_tokens, num_experts, top_k)
    block_t = next_pow2(num_tokens)  # the routing tile needs no tensor-core padding
    _router_route_sort_kernel[(triton.cdiv(num_experts, tiles.block_e), num_splits)](
        x, weight, weight if bias is None else bias, partial, counter,
        x if correction_bias is None else correction_bias, x if is_real_token is None else is_real_token,
        topk_ids, topk_weights, order.sorted_slots, order.cu_num_slots_per_expert, order.active_experts,
        order.num_active_experts, num_tokens, x.stride(0), float(routed_scaling_factor),
        NUM_EXPERTS=num_experts, HIDDEN=hidden, HAS_BIAS=bias is not None,
        DOT_PRECISION="ieee" if x.dtype == torch.float32 or is_upcast else "tf32", IS_DOT_UPCAST=is_upcast,
        TOP_K=top_k, SCORING=SCORING_IDS[scoring], NORM_TOPK=norm_topk_prob,
        HAS_CORRECTION_BIAS=correction_bias is not None, HAS_IS_REAL=is_real_token is not None,
        PRECISE_EXP=device.type == "cuda", NUM_SPLITS=num_splits, BLOCK_H=tiles.block_h, BLOCK_EP=tiles.block_e,
        BLOCK_TP=max(16, next_pow2(num_tokens)), BLOCK_T=block_t, BLOCK_E=blocks["BLOCK_E"],
        BLOCK_K=blocks["BLOCK_K"],
        norm_weight_ptr=x if norm is None else norm.weight,
        residual_ptr=x if norm is None or norm.residual is None else norm.residual,
        normed_ptr=x if norm is None else norm.normed,
        stream_ptr=x if norm is None or norm.stream is None else norm.stream,
        eps=0.0 if norm is None else float(norm.eps), HAS_NORM=norm is not None,
        HAS_RESIDUAL=norm is not None and norm.residual is not None,
        IS_OFFSET=norm is not None and norm.is_offset,
        num_warps=tiles.num_warps or routing_warps(block_t, blocks["BLOCK_E"]), **launch_overlap(x),
    )
    return topk_ids, topk_weights, order
