"""Lossless verification of chain drafts: greedy matching or speculative rejection sampling.

The torch reference every verify kernel is tested against. Pure: no state, no host reads except
the per-request draft counts when a sampled request carries its own generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.device_copy import tensor_to_device
from specbench.speculation.sampling import SamplingTensors, logits_to_probs, sample_from_probs

PLACEHOLDER_TOKEN_ID = -1


@dataclass(frozen=True, slots=True)
class VerifyResult:
    # [num_reqs, max_num_draft + 1] int64: accepted drafts, then the recovered/bonus token, padded with -1
    output_token_ids: torch.Tensor
    num_accepted: torch.Tensor  # [num_reqs] int64, accepted draft tokens (excludes the recovered/bonus token)


def verify(
    target_logits: torch.Tensor,  # [num_tokens, V]; request r owns rows cu[r] .. cu[r] + num_draft_tokens[r]
    draft_token_ids: torch.Tensor,  # [num_reqs, max_num_draft] int64, padded with -1
    num_draft_tokens: torch.Tensor,  # [num_reqs] int64; host tensor preferred (see draw_uniforms)
    draft_probs: torch.Tensor | None,  # [num_reqs, max_num_draft, V] warped draft dists; None = deterministic
    st: SamplingTensors,
) -> VerifyResult:
    """Accept a prefix of each request's drafts and append one recovered (first rejection) or bonus token.

    Row i of a request is the target distribution of the token after draft i-1 (row 0 follows the
    last committed token); cu = prefix sum of (1 + num_draft_tokens). The emitted token at the stop
    row is always row `num_accepted`: the first rejected position, or `num_draft` for the bonus.
    """
    num_reqs, max_num_draft = draft_token_ids.shape
    check_shapes(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st)
    device = target_logits.device
    vocab_size = target_logits.shape[1]
    num_draft = tensor_to_device(num_draft_tokens, device, torch.int64)
    positions = torch.arange(max_num_draft + 1, device=device)  # [K + 1]
    is_draft = positions[None, :max_num_draft] < num_draft[:, None]  # [num_reqs, K]
    drafts = draft_token_ids.to(device).clamp_min(0)  # [num_reqs, K]; padding masked by is_draft
    logits = rows_per_request(target_logits, num_draft, positions)  # [num_reqs, K + 1, V]
    target_argmax = logits.argmax(dim=-1)  # [num_reqs, K + 1]
    is_greedy_match = drafts == target_argmax[:, :max_num_draft]  # [num_reqs, K]

    if st.all_greedy:
        num_accepted = _num_leading(is_greedy_match & is_draft)
        final_tokens = target_argmax.gather(1, num_accepted[:, None])[:, 0]
        return _assemble(drafts, num_accepted, final_tokens, positions)

    uniforms = draw_uniforms(st, num_draft_tokens, max_num_draft, device)  # [num_reqs, K] in (0, 1]
    rows_per_req = max_num_draft + 1
    target_probs = logits_to_probs(
        logits.flatten(0, 1),
        st.temperature.repeat_interleave(rows_per_req),
        st.top_k.repeat_interleave(rows_per_req),
        st.top_p.repeat_interleave(rows_per_req),
    ).view(num_reqs, rows_per_req, vocab_size)
    target_p = target_probs[:, :max_num_draft].gather(2, drafts[..., None])[..., 0]  # [num_reqs, K]
    if draft_probs is None:
        draft_p = torch.ones_like(target_p)
    else:
        draft_p = draft_probs.to(device).float().gather(2, drafts[..., None])[..., 0]
    ratio = torch.where(draft_p > 0, target_p / draft_p.clamp_min(torch.finfo(torch.float32).tiny), 0.0)
    is_sampled_accept = uniforms <= ratio
    is_accepted = torch.where(st.is_greedy[:, None], is_greedy_match, is_sampled_accept)
    num_accepted = _num_leading(is_accepted & is_draft)

    req = torch.arange(num_reqs, device=device)
    stop_target_probs = target_probs[req, num_accepted]  # [num_reqs, V]
    stop_draft_probs = _draft_probs_at(draft_probs, drafts, num_accepted, num_draft, vocab_size)  # [num_reqs, V]
    recovery = _recovery_probs(stop_target_probs, stop_draft_probs)
    sampled_tokens = sample_from_probs(recovery, st.sampled_generators())
    greedy_tokens = target_argmax.gather(1, num_accepted[:, None])[:, 0]
    final_tokens = torch.where(st.is_greedy, greedy_tokens, sampled_tokens)
    return _assemble(drafts, num_accepted, final_tokens, positions)


def _recovery_probs(
    target_probs: torch.Tensor,  # [num_reqs, V] at the stop row
    draft_probs: torch.Tensor,  # [num_reqs, V] at the stop row; zeros for a bonus row
) -> torch.Tensor:  # [num_reqs, V], unnormalized
    """Residual max(target - draft, 0): exactly the mass the acceptance test left uncovered."""
    residual = (target_probs - draft_probs).clamp_min(0.0)
    # A rejection implies sum(residual) = TV(target, draft) > 0 exactly; rounding can still zero it.
    return torch.where(residual.sum(dim=-1, keepdim=True) > 0, residual, target_probs)


def _draft_probs_at(
    draft_probs: torch.Tensor | None,  # [num_reqs, K, V] or None
    drafts: torch.Tensor,  # [num_reqs, K]
    stop_row: torch.Tensor,  # [num_reqs]
    num_draft: torch.Tensor,  # [num_reqs]
    vocab_size: int,
) -> torch.Tensor:  # [num_reqs, V]
    """The draft distribution at each request's stop row; zeros when that row is the bonus row."""
    num_reqs, max_num_draft = drafts.shape
    stop = torch.zeros(num_reqs, vocab_size, device=drafts.device)
    if max_num_draft == 0:
        return stop
    row = stop_row.clamp_max(max_num_draft - 1)
    if draft_probs is None:  # a deterministic draft is a point mass on the proposed token
        stop.scatter_(1, drafts.gather(1, row[:, None]), 1.0)
    else:
        stop = draft_probs.to(drafts.device).float()[torch.arange(num_reqs, device=drafts.device), row]
    return stop.masked_fill((stop_row == num_draft)[:, None], 0.0)


def draw_uniforms(
    st: SamplingTensors, num_draft_tokens: torch.Tensor, max_num_draft: int, device: torch.device
) -> torch.Tensor:  # [num_reqs, max_num_draft] in (0, 1]
    """Acceptance uniforms; a seeded sampled request draws exactly its own num_draft values, before its
    recovery/bonus exponentials, so its tokens do not depend on the rest of the batch.

    Reading those counts is a host sync when num_draft_tokens lives on the device and a seeded
    sampled request is present; the scheduler knows the counts, so it passes a CPU tensor.
    """
    uniforms = torch.rand(st.num_reqs, max_num_draft, device=device)
    seeded = [r for r, g in enumerate(st.sampled_generators()) if g is not None]
    if seeded and max_num_draft > 0:
        counts = num_draft_tokens.tolist()
        for r in seeded:
            uniforms[r, : counts[r]] = torch.rand(counts[r], generator=st.generators[r], device=device)
    # rand is in [0, 1); 1 - u is in (0, 1], so `u <= ratio` never accepts a zero ratio.
    return 1.0 - uniforms


def rows_per_request(
    target_logits: torch.Tensor,  # [num_tokens, V]
    num_draft: torch.Tensor,  # [num_reqs]
    positions: torch.Tensor,  # [K + 1]
) -> torch.Tensor:  # [num_reqs, K + 1, V]; padding rows repeat the request's row 0
    num_rows = num_draft + 1
    first_row = torch.cumsum(num_rows, dim=0) - num_rows  # [num_reqs] = cu_num_rows[:-1]
    is_row = positions[None, :] < num_rows[:, None]
    index = torch.where(is_row, first_row[:, None] + positions[None, :], first_row[:, None])
    return target_logits[index]


def _num_leading(is_accepted: torch.Tensor) -> torch.Tensor:  # [num_reqs, K] bool -> [num_reqs] int64
    return is_accepted.long().cumprod(dim=1).sum(dim=1)


def _assemble(
    drafts: torch.Tensor,  # [num_reqs, K]
    num_accepted: torch.Tensor,  # [num_reqs]
    final_tokens: torch.Tensor,  # [num_reqs]
    positions: torch.Tensor,  # [K + 1]
) -> VerifyResult:
    padded = torch.nn.functional.pad(drafts, (0, 1), value=PLACEHOLDER_TOKEN_ID)  # [num_reqs, K + 1]
    output = torch.where(positions[None, :] < num_accepted[:, None], padded, PLACEHOLDER_TOKEN_ID)
    output = output.scatter(1, num_accepted[:, None], final_tokens[:, None])
    return VerifyResult(output_token_ids=output, num_accepted=num_accepted)


def check_shapes(
    target_logits: torch.Tensor,
    draft_token_ids: torch.Tensor,
    num_draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    st: SamplingTensors,
) -> None:
    num_reqs, max_num_draft = draft_token_ids.shape
    if target_logits.dim() != 2:
        raise ValueError(f"target_logits must be [num_tokens, V], got {tuple(target_logits.shape)}")
    if tuple(num_draft_tokens.shape) != (num_reqs,) or st.num_reqs != num_reqs:
        raise ValueError(
            f"num_reqs mismatch: draft_token_ids {num_reqs}, num_draft_tokens {tuple(num_draft_tokens.shape)}, "
            f"sampling tensors {st.num_reqs}"
        )
    expected = (num_reqs, max_num_draft, target_logits.shape[1])
    if draft_probs is not None and tuple(draft_probs.shape) != expected:
        raise ValueError(f"draft_probs must be {expected}, got {tuple(draft_probs.shape)}")
