"""The (token, expert) slots of a decode or verify batch sorted by expert, for the grouped expert kernels of
kernels/moe_gemv.py: each expert gets a contiguous range of rows and the active experts a list of their own.

`sort_by_expert_reference` is the definition in torch ops (about ten small kernels a layer); `sort_by_expert` is one
single-program kernel doing the same, bit for bit; `write_expert_sort` is its body, shared with the routing kernel
of kernels/moe_route.py, which routes and sorts in one launch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from specbench.kernels.pdl import launch_overlap, wait_for_inputs
from specbench.kernels.runtime import check_runnable, next_pow2


@dataclass(frozen=True)
class ExpertSort:
    sorted_slots: torch.Tensor  # [num_tokens * k] int32: slots t * k + j, stably sorted by expert; padding last
    cu_num_slots_per_expert: torch.Tensor  # [num_experts + 1] int32: expert e owns sorted rows [cu[e], cu[e + 1])
    active_experts: torch.Tensor  # [num_experts] int32: experts with a slot first (ascending), then the others
    num_active_experts: torch.Tensor  # [1] int32


def empty_expert_sort(num_slots: int, num_experts: int, device: torch.device) -> ExpertSort:
    return ExpertSort(
        sorted_slots=torch.empty(num_slots, dtype=torch.int32, device=device),
        cu_num_slots_per_expert=torch.empty(num_experts + 1, dtype=torch.int32, device=device),
        active_experts=torch.empty(num_experts, dtype=torch.int32, device=device),
        num_active_experts=torch.empty(1, dtype=torch.int32, device=device),
    )


def sort_by_expert_reference(
    topk_ids: torch.Tensor,  # [num_tokens, k] int64; num_experts marks a padded row
    num_experts: int,
) -> ExpertSort:
    """The definition of the sort, in torch ops."""
    flat = topk_ids.reshape(-1)
    sorted_slots = torch.argsort(flat, stable=True).to(torch.int32)
    counts = torch.zeros(num_experts + 1, dtype=torch.int32, device=flat.device)
    counts.scatter_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))
    counts = counts[:num_experts]  # the padding sentinel's count is dropped: its slots are in no range
    cu = torch.zeros(num_experts + 1, dtype=torch.int32, device=flat.device)
    cu[1:] = torch.cumsum(counts, 0)
    is_active = counts > 0
    active_experts = torch.argsort((~is_active).to(torch.int8), stable=True).to(torch.int32)
    return ExpertSort(sorted_slots=sorted_slots, cu_num_slots_per_expert=cu, active_experts=active_experts,
                      num_active_experts=is_active.sum(dtype=torch.int32).reshape(1))


@triton.jit
def write_expert_sort(
    ids,  # [BLOCK_T, BLOCK_K] int32 tile: token t's j-th expert; NUM_EXPERTS on padded rows; anything past TOP_K
    num_tokens,
    sorted_slots_ptr, cu_ptr, active_ptr, num_active_ptr,  # ExpertSort, written
    NUM_EXPERTS: tl.constexpr,
    TOP_K: tl.constexpr,
    BLOCK_T: tl.constexpr,  # >= num_tokens
    BLOCK_E: tl.constexpr,  # >= NUM_EXPERTS
    BLOCK_K: tl.constexpr,  # >= TOP_K
):
    if BLOCK_T == 1:  # one token (plain decode of one request): the same sort without a scan over experts
        _write_one_token_sort(ids, sorted_slots_ptr, cu_ptr, active_ptr, num_active_ptr, NUM_EXPERTS, TOP_K,
                              BLOCK_E, BLOCK_K)
        return
    # A token holds each expert at most once, so the slots of expert e in slot order are those of the tokens that
    # chose e, in token order: slot (t, j) with id e goes to row cu[e] + (tokens before t that chose e).
    t = tl.arange(0, BLOCK_T)
    e = tl.arange(0, BLOCK_E)
    kk = tl.arange(0, BLOCK_K)
    is_t = t < num_tokens
    is_e = e < NUM_EXPERTS
    member = tl.zeros([BLOCK_T, BLOCK_E], dtype=tl.int32)  # [t, e]: token t chose expert e
    for j in tl.static_range(TOP_K):
        ids_j = tl.sum(tl.where(kk[None, :] == j, ids, 0), axis=1)  # [BLOCK_T]
        member += ((ids_j[:, None] == e[None, :]) & is_e[None, :] & is_t[:, None]).to(tl.int32)
    counts = tl.sum(member, axis=0)  # [BLOCK_E]
    cu = tl.cumsum(counts, axis=0) - counts  # exclusive
    num_real_slots = tl.sum(counts, axis=0)
    tl.store(cu_ptr + e, cu, mask=is_e)
    tl.store(cu_ptr + NUM_EXPERTS, num_real_slots)
    start = cu[None, :] + tl.cumsum(member, axis=0) - member  # [t, e]: sorted row of token t's slot of e
    first = tl.sum(tl.where(kk[None, :] == 0, ids, 0), axis=1)
    is_pad = ((first == NUM_EXPERTS) & is_t).to(tl.int32)  # a padded row: all its k ids are the sentinel
    pads_before = tl.cumsum(is_pad, axis=0) - is_pad
    for j in tl.static_range(TOP_K):
        ids_j = tl.sum(tl.where(kk[None, :] == j, ids, 0), axis=1)
        row = tl.sum(tl.where(ids_j[:, None] == e[None, :], start, 0), axis=1)
        row = tl.where(is_pad != 0, num_real_slots + pads_before * TOP_K + j, row)
        tl.store(sorted_slots_ptr + row, t * TOP_K + j, mask=is_t)
    is_active = ((counts > 0) & is_e).to(tl.int32)
    is_idle = ((counts == 0) & is_e).to(tl.int32)
    num_active = tl.sum(is_active, axis=0)
    position = tl.where(is_active != 0, tl.cumsum(is_active, axis=0) - 1, num_active + tl.cumsum(is_idle, axis=0) - 1)
    tl.store(active_ptr + position, e, mask=is_e)
    tl.store(num_active_ptr, num_active)


@triton.jit
def _write_one_token_sort(
    ids,  # [1, BLOCK_K] int32 tile: the token's k distinct experts, or k times NUM_EXPERTS (a padded row)
    sorted_slots_ptr, cu_ptr, active_ptr, num_active_ptr,  # ExpertSort, written
    NUM_EXPERTS: tl.constexpr,
    TOP_K: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    # write_expert_sort's results in closed form for one token, whose k slots hold distinct experts: expert e's
    # range starts after the slots with a lower id, a slot's row is its id's rank among the k (padding: slot order),
    # and the experts below e that are active are exactly those ranks. Compares of [experts, k] and [k, k] tiles,
    # no scan over the experts.
    e = tl.arange(0, BLOCK_E)
    kk = tl.arange(0, BLOCK_K)
    is_e = e < NUM_EXPERTS
    is_k = kk < TOP_K
    slot_ids = tl.where(is_k, tl.reshape(ids, [BLOCK_K]), NUM_EXPERTS)  # [BLOCK_K]
    cu = tl.sum(((slot_ids[None, :] < e[:, None]) & is_k[None, :]).to(tl.int32), axis=1)  # [BLOCK_E]
    num_real_slots = tl.sum((is_k & (slot_ids < NUM_EXPERTS)).to(tl.int32), axis=0)
    tl.store(cu_ptr + e, cu, mask=is_e)
    tl.store(cu_ptr + NUM_EXPERTS, num_real_slots)
    before = (slot_ids[None, :] < slot_ids[:, None]) | ((slot_ids[None, :] == slot_ids[:, None]) &
                                                       (kk[None, :] < kk[:, None]))  # [j, j']: j' sorts first
    rank = tl.sum((before & is_k[None, :]).to(tl.int32), axis=1)  # [BLOCK_K]
    tl.store(sorted_slots_ptr + rank, kk, mask=is_k)
    is_active = tl.sum(((slot_ids[None, :] == e[:, None]) & is_k[None, :]).to(tl.int32), axis=1) > 0
    position = tl.where(is_active, cu, num_real_slots + e - cu)  # distinct experts: cu[e] active ones below e
    tl.store(active_ptr + position, e, mask=is_e)
    tl.store(num_active_ptr, num_real_slots)


@triton.jit
def _sort_kernel(
    ids_ptr,  # [num_tokens, TOP_K] int64
    sorted_slots_ptr, cu_ptr, active_ptr, num_active_ptr,  # ExpertSort, written
    num_tokens,
    NUM_EXPERTS: tl.constexpr,
    TOP_K: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_K: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    t = tl.arange(0, BLOCK_T)
    kk = tl.arange(0, BLOCK_K)
    ids = tl.load(ids_ptr + t[:, None] * TOP_K + kk[None, :], mask=(t < num_tokens)[:, None] & (kk < TOP_K)[None, :],
                  other=NUM_EXPERTS).to(tl.int32)
    write_expert_sort(ids, num_tokens, sorted_slots_ptr, cu_ptr, active_ptr, num_active_ptr,
                      NUM_EXPERTS, TOP_K, BLOCK_T, BLOCK_E, BLOCK_K)


def sort_blocks(num_tokens: int, num_experts: int, top_k: int) -> dict:
    """BLOCK_T, BLOCK_E, BLOCK_K and num_warps of the single-program sort and routing kernels."""
    block_t, block_e = max(16, next_pow2(num_tokens)), next_pow2(num_experts)
    # Its [tokens, experts] tiles live in registers: about 16 elements a thread and tile (64 x 128: 16 warps).
    num_warps = min(16, max(4, block_t * block_e // 512))
    return {"BLOCK_T": block_t, "BLOCK_E": block_e, "BLOCK_K": next_pow2(top_k), "num_warps": num_warps}


def sort_by_expert(
    topk_ids: torch.Tensor,  # [num_tokens, k] int64; num_experts marks a padded row
    num_experts: int,
) -> ExpertSort:
    """sort_by_expert_reference in one kernel launch (no host sync: CUDA-graph safe)."""
    check_runnable(_sort_kernel, topk_ids)
    num_tokens, top_k = topk_ids.shape
    order = empty_expert_sort(num_tokens * top_k, num_experts, topk_ids.device)
    if num_tokens == 0:
        return sort_by_expert_reference(topk_ids, num_experts)
    _sort_kernel[(1,)](
        topk_ids.contiguous(), order.sorted_slots, order.cu_num_slots_per_expert, order.active_experts,
        order.num_active_experts, num_tokens,
        NUM_EXPERTS=num_experts, TOP_K=top_k, **sort_blocks(num_tokens, num_experts, top_k),
        **launch_overlap(topk_ids),
    )
    return order
