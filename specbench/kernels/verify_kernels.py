"""Triton programs of chain-draft verification: vocab-chunked argmax, acceptance scan, recovery sampling.

Ties go to the lowest index (torch.argmax); divisions round to nearest (`div_rn`), so scores equal torch's bits.
"""

from __future__ import annotations

import triton
import triton.language as tl

from specbench.kernels.pdl import wait_for_inputs

_NO_INDEX = tl.constexpr(2**31 - 1)


@triton.jit
def _first_argmax(values, indices, axis: tl.constexpr):
    """Lowest index among the maxima of per-chunk partials (values, indices) along `axis`."""
    best = tl.max(values, axis)
    if axis == 0:
        is_best = values == best
    else:
        is_best = values == best[:, None]
    return tl.min(tl.where(is_best, indices, _NO_INDEX), axis)


@triton.jit
def argmax_partial_kernel(
    logits_ptr,  # [num_rows, vocab_size]
    part_value_ptr,  # fp32 [num_rows, num_chunks]
    part_index_ptr,  # int32 [num_rows, num_chunks]
    vocab_size,
    num_chunks,
    stride_logits_row,
    BLOCK_V: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    cols = chunk * BLOCK_V + tl.arange(0, BLOCK_V)
    x = tl.load(logits_ptr + row * stride_logits_row + cols, mask=cols < vocab_size, other=float("-inf"))
    value, index = tl.max(x.to(tl.float32), 0, return_indices=True, return_indices_tie_break_left=True)
    tl.store(part_value_ptr + row * num_chunks + chunk, value)
    tl.store(part_index_ptr + row * num_chunks + chunk, chunk * BLOCK_V + index)


@triton.jit
def accept_kernel(
    part_value_ptr,  # fp32 [num_tokens, num_chunks]: argmax partials of the target logits rows
    part_index_ptr,  # int32 [num_tokens, num_chunks]
    draft_ptr,  # [num_reqs, max_num_draft] int64, padded with -1
    num_draft_ptr,  # [num_reqs] int64
    target_probs_ptr,  # fp32 [num_reqs, max_num_draft + 1, vocab_size] (sampling only)
    draft_probs_ptr,  # fp32 [num_reqs, max_num_draft, vocab_size] (HAS_DRAFT_PROBS only)
    uniforms_ptr,  # fp32 [num_reqs, max_num_draft] in (0, 1] (sampling only)
    is_greedy_ptr,  # [num_reqs] bool (sampling only)
    output_ptr,  # [num_reqs, max_num_draft + 1] int64
    num_accepted_ptr,  # [num_reqs] int64
    greedy_token_ptr,  # [num_reqs] int64, target argmax at the stop row
    num_chunks,
    max_num_draft,
    stride_draft_req,
    stride_target_req, stride_target_row,
    stride_draft_probs_req, stride_draft_probs_row,
    ALL_GREEDY: tl.constexpr,
    HAS_DRAFT_PROBS: tl.constexpr,
    BLOCK_K: tl.constexpr,  # >= max_num_draft + 1
    BLOCK_R: tl.constexpr,  # >= num_reqs
    CHUNKS_PAD: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    req = tl.program_id(0).to(tl.int64)
    j = tl.arange(0, BLOCK_K)
    c = tl.arange(0, CHUNKS_PAD)
    num_draft = tl.load(num_draft_ptr + req)
    is_draft = j < num_draft
    is_row = j <= num_draft
    earlier = tl.arange(0, BLOCK_R)
    first_row = tl.sum(tl.load(num_draft_ptr + earlier, mask=earlier < req, other=-1) + 1, 0)  # cu_num_rows[req]
    part = (first_row + j)[:, None] * num_chunks + c[None, :]
    part_mask = is_row[:, None] & (c < num_chunks)[None, :]
    target_argmax = _first_argmax(
        tl.load(part_value_ptr + part, mask=part_mask, other=float("-inf")),
        tl.load(part_index_ptr + part, mask=part_mask, other=_NO_INDEX),
        1,
    ).to(tl.int64)  # [BLOCK_K]
    drafts = tl.maximum(tl.load(draft_ptr + req * stride_draft_req + j, mask=is_draft, other=0), 0)
    is_match = drafts == target_argmax
    if ALL_GREEDY:
        is_accepted = is_match
    else:
        target_p = tl.load(target_probs_ptr + req * stride_target_req + j * stride_target_row + drafts,
                           mask=is_draft, other=0.0)
        if HAS_DRAFT_PROBS:
            draft_p = tl.load(draft_probs_ptr + req * stride_draft_probs_req + j * stride_draft_probs_row + drafts,
                              mask=is_draft, other=0.0)
        else:
            draft_p = tl.full([BLOCK_K], 1.0, tl.float32)  # a deterministic draft is a point mass
        ratio = tl.where(draft_p > 0, tl.math.div_rn(target_p, tl.maximum(draft_p, 1.1754943508222875e-38)), 0.0)
        uniforms = tl.load(uniforms_ptr + req * max_num_draft + j, mask=is_draft, other=2.0)
        is_accepted = tl.where(tl.load(is_greedy_ptr + req), is_match, uniforms <= ratio)
    # First position that is not an accepted draft (num_draft when every draft is accepted).
    num_accepted = tl.min(tl.where(is_accepted & is_draft, BLOCK_K, j), 0).to(tl.int64)
    greedy_token = tl.sum(tl.where(j == num_accepted, target_argmax, 0), 0)
    output = tl.where(j < num_accepted, drafts, -1)
    if ALL_GREEDY:
        output = tl.where(j == num_accepted, greedy_token, output)
    tl.store(output_ptr + req * (max_num_draft + 1) + j, output, mask=j <= max_num_draft)
    tl.store(num_accepted_ptr + req, num_accepted)
    tl.store(greedy_token_ptr + req, greedy_token)


@triton.jit
def recovery_partial_kernel(
    target_probs_ptr,  # fp32 [num_reqs, max_num_draft + 1, vocab_size]
    draft_probs_ptr,  # fp32 [num_reqs, max_num_draft, vocab_size] (HAS_DRAFT_PROBS only)
    draft_ptr,  # [num_reqs, max_num_draft] int64, padded with -1
    num_draft_ptr,  # [num_reqs] int64
    num_accepted_ptr,  # [num_reqs] int64: the stop row
    exponentials_ptr,  # fp32 [num_reqs, vocab_size], Exp(1) draws clamped to >= tiny
    part_sum_ptr,  # fp32 [num_reqs, num_chunks]: residual mass
    part_value_ptr,  # fp32 [num_reqs, num_chunks, 2]: best score of (residual, target) / exponential
    part_index_ptr,  # int32 [num_reqs, num_chunks, 2]
    vocab_size,
    num_chunks,
    stride_draft_req,
    stride_target_req, stride_target_row,
    stride_draft_probs_req, stride_draft_probs_row,
    HAS_DRAFT_PROBS: tl.constexpr,
    BLOCK_V: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    req = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    cols = chunk * BLOCK_V + tl.arange(0, BLOCK_V)
    is_col = cols < vocab_size
    stop = tl.load(num_accepted_ptr + req)
    is_draft_row = stop < tl.load(num_draft_ptr + req)  # else the bonus row: no draft mass to remove
    target = tl.load(target_probs_ptr + req * stride_target_req + stop * stride_target_row + cols,
                     mask=is_col, other=0.0)
    num_draft_cols = tl.where(is_draft_row, vocab_size, 0)  # a vector mask (scalar & vector breaks the interpreter)
    if HAS_DRAFT_PROBS:
        draft = tl.load(draft_probs_ptr + req * stride_draft_probs_req + stop * stride_draft_probs_row + cols,
                        mask=cols < num_draft_cols, other=0.0)
    else:
        token = tl.maximum(tl.load(draft_ptr + req * stride_draft_req + stop, mask=is_draft_row, other=0), 0)
        # A point mass at the rejected draft; none on the bonus row (the masked load's 0 is no draft of token 0).
        draft = tl.where((cols == token) & (cols < num_draft_cols), 1.0, 0.0)
    residual = tl.maximum(target - draft, 0.0)
    exponentials = tl.load(exponentials_ptr + req * vocab_size + cols, mask=is_col, other=1.0)
    residual_score = tl.where(is_col, tl.math.div_rn(residual, exponentials), float("-inf"))
    target_score = tl.where(is_col, tl.math.div_rn(target, exponentials), float("-inf"))
    r_value, r_index = tl.max(residual_score, 0, return_indices=True, return_indices_tie_break_left=True)
    t_value, t_index = tl.max(target_score, 0, return_indices=True, return_indices_tie_break_left=True)
    part = req * num_chunks + chunk
    tl.store(part_sum_ptr + part, tl.sum(residual, 0))
    tl.store(part_value_ptr + 2 * part, r_value)
    tl.store(part_value_ptr + 2 * part + 1, t_value)
    tl.store(part_index_ptr + 2 * part, chunk * BLOCK_V + r_index)
    tl.store(part_index_ptr + 2 * part + 1, chunk * BLOCK_V + t_index)


@triton.jit
def recovery_final_kernel(
    part_sum_ptr,  # fp32 [num_reqs, num_chunks]
    part_value_ptr,  # fp32 [num_reqs, num_chunks, 2]
    part_index_ptr,  # int32 [num_reqs, num_chunks, 2]
    num_accepted_ptr,  # [num_reqs] int64
    greedy_token_ptr,  # [num_reqs] int64
    is_greedy_ptr,  # [num_reqs] bool
    output_ptr,  # [num_reqs, max_num_draft + 1] int64
    num_chunks,
    max_num_draft,
    CHUNKS_PAD: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    req = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, CHUNKS_PAD)
    is_chunk = c < num_chunks
    part = req * num_chunks + c
    residual_mass = tl.sum(tl.load(part_sum_ptr + part, mask=is_chunk, other=0.0), 0)
    residual_token = _first_argmax(tl.load(part_value_ptr + 2 * part, mask=is_chunk, other=float("-inf")),
                                   tl.load(part_index_ptr + 2 * part, mask=is_chunk, other=_NO_INDEX), 0)
    target_token = _first_argmax(tl.load(part_value_ptr + 2 * part + 1, mask=is_chunk, other=float("-inf")),
                                 tl.load(part_index_ptr + 2 * part + 1, mask=is_chunk, other=_NO_INDEX), 0)
    # Rounding can zero the residual of a rejection; the reference then samples the target itself.
    sampled = tl.where(residual_mass > 0, residual_token, target_token).to(tl.int64)
    token = tl.where(tl.load(is_greedy_ptr + req), tl.load(greedy_token_ptr + req), sampled)
    stop = tl.load(num_accepted_ptr + req)
    tl.store(output_ptr + req * (max_num_draft + 1) + stop, token)
