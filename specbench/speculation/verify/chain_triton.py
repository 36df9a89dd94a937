"""`verify_triton`: `specbench.speculation.verify.chain.verify` with its per-token work in Triton; same signature and
result.

Same random draws in the same order, so equal RNG states give the reference's tokens exactly. The launcher lives
beside the reference (it speaks `SamplingTensors` and `VerifyResult`); the kernels it launches stay in the leaf
`specbench.kernels.verify_kernels`, which knows only tensors.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import triton

from specbench.device_copy import tensor_to_device
from specbench.kernels.pdl import launch_overlap
from specbench.kernels.runtime import check_runnable, next_pow2
from specbench.kernels.verify_kernels import (
    accept_kernel,
    argmax_partial_kernel,
    recovery_final_kernel,
    recovery_partial_kernel,
)
from specbench.speculation.sampling import SamplingTensors, logits_to_probs

# The reference's own shape checks, uniform draws and row gather define the contract; reuse, don't copy.
from specbench.speculation.verify.chain import VerifyResult, check_shapes, draw_uniforms, rows_per_request

DEFAULT_BLOCK_V = 4096


def verify_triton(
    target_logits: torch.Tensor,  # [num_tokens, V]; request r owns rows cu[r] .. cu[r] + num_draft_tokens[r]
    draft_token_ids: torch.Tensor,  # [num_reqs, max_num_draft] int64, padded with -1
    num_draft_tokens: torch.Tensor,  # [num_reqs] int64; host tensor preferred (as for `verify`)
    draft_probs: torch.Tensor | None,  # [num_reqs, max_num_draft, V] warped draft dists; None = deterministic
    st: SamplingTensors,
    *,
    block_v: int | None = None,
) -> VerifyResult:
    num_reqs, max_num_draft = draft_token_ids.shape
    check_shapes(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st)
    check_runnable(accept_kernel, target_logits)
    device = target_logits.device
    num_tokens, vocab_size = target_logits.shape
    block_v = block_v or min(DEFAULT_BLOCK_V, next_pow2(vocab_size))
    num_chunks = triton.cdiv(vocab_size, block_v)
    num_draft = tensor_to_device(num_draft_tokens, device, torch.int64)
    # Kernels clamp the -1 padding themselves; a zero-width draft tensor gets one dummy column of storage.
    drafts = draft_token_ids.to(device=device, dtype=torch.int64)
    if not max_num_draft:
        drafts = torch.zeros(num_reqs, 1, dtype=torch.int64, device=device)
    elif drafts.stride(-1) != 1:
        drafts = drafts.contiguous()

    if target_logits.stride(-1) != 1:
        target_logits = target_logits.contiguous()
    part_value = torch.empty(num_tokens, num_chunks, dtype=torch.float32, device=device)
    part_index = torch.empty(num_tokens, num_chunks, dtype=torch.int32, device=device)
    argmax_partial_kernel[(num_tokens, num_chunks)](
        target_logits, part_value, part_index, vocab_size, num_chunks, target_logits.stride(0), BLOCK_V=block_v,
        **launch_overlap(target_logits),
    )

    output = torch.empty(num_reqs, max_num_draft + 1, dtype=torch.int64, device=device)
    num_accepted = torch.empty(num_reqs, dtype=torch.int64, device=device)
    greedy_token = torch.empty(num_reqs, dtype=torch.int64, device=device)
    uniforms = target_probs = draft_p = None
    if not st.all_greedy:
        # Warping stays in torch (a vocab sort per row): it dominates sampled verification at real vocab sizes.
        uniforms = draw_uniforms(st, num_draft_tokens, max_num_draft, device)  # [num_reqs, K]
        rows_per_req = max_num_draft + 1
        positions = torch.arange(rows_per_req, device=device)
        target_probs = logits_to_probs(
            rows_per_request(target_logits, num_draft, positions).flatten(0, 1),
            st.temperature.repeat_interleave(rows_per_req),
            st.top_k.repeat_interleave(rows_per_req),
            st.top_p.repeat_interleave(rows_per_req),
        ).view(num_reqs, rows_per_req, vocab_size)
        draft_p = None if draft_probs is None else draft_probs.to(device=device, dtype=torch.float32).contiguous()
        uniforms = uniforms.contiguous() if max_num_draft else torch.ones(num_reqs, 1, device=device)
    # Unused pointer arguments get a live tensor; the constexpr flags keep the kernels off them.
    target_arg = target_probs if target_probs is not None else part_value
    draft_arg = draft_p if draft_p is not None else target_arg
    target_strides = target_probs.stride()[:2] if target_probs is not None else (0, 0)
    draft_strides = draft_p.stride()[:2] if draft_p is not None else (0, 0)
    accept_kernel[(num_reqs,)](
        part_value, part_index, drafts, num_draft, target_arg, draft_arg,
        uniforms if uniforms is not None else part_value, st.is_greedy,
        output, num_accepted, greedy_token, num_chunks, max_num_draft, drafts.stride(0),
        *target_strides, *draft_strides,
        ALL_GREEDY=st.all_greedy,
        HAS_DRAFT_PROBS=draft_p is not None,
        BLOCK_K=max(2, next_pow2(max_num_draft + 1)),
        BLOCK_R=max(2, next_pow2(num_reqs)),
        CHUNKS_PAD=next_pow2(num_chunks), **launch_overlap(part_value),
    )
    if st.all_greedy:
        return VerifyResult(output_token_ids=output, num_accepted=num_accepted)

    exponentials = draw_exponentials(st.sampled_generators(), vocab_size, device)  # [num_reqs, V]
    part_sum = torch.empty(num_reqs, num_chunks, dtype=torch.float32, device=device)
    part_score = torch.empty(num_reqs, num_chunks, 2, dtype=torch.float32, device=device)
    part_token = torch.empty(num_reqs, num_chunks, 2, dtype=torch.int32, device=device)
    recovery_partial_kernel[(num_reqs, num_chunks)](
        target_probs, draft_arg, drafts, num_draft, num_accepted, exponentials,
        part_sum, part_score, part_token, vocab_size, num_chunks, drafts.stride(0),
        *target_strides, *draft_strides,
        HAS_DRAFT_PROBS=draft_p is not None,
        BLOCK_V=block_v, **launch_overlap(target_probs),
    )
    recovery_final_kernel[(num_reqs,)](
        part_sum, part_score, part_token, num_accepted, greedy_token, st.is_greedy, output,
        num_chunks, max_num_draft,
        CHUNKS_PAD=next_pow2(num_chunks), **launch_overlap(part_sum),
    )
    return VerifyResult(output_token_ids=output, num_accepted=num_accepted)


def draw_exponentials(
    generators: Sequence[torch.Generator | None], vocab_size: int, device: torch.device
) -> torch.Tensor:  # [num_reqs, vocab_size] fp32, >= tiny
    """Exp(1) draws exactly as `sample_from_probs` makes them (same RNG calls, same order)."""
    exponentials = torch.empty(len(generators), vocab_size, dtype=torch.float32, device=device)
    if any(g is None for g in generators):
        exponentials.exponential_()
    for row, generator in enumerate(generators):
        if generator is not None:
            exponentials[row].exponential_(generator=generator)
    return exponentials.clamp_min_(torch.finfo(torch.float32).tiny)
