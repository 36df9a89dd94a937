"""One input type per phase of a speculative round; each is built fresh, never mutated.

Target phases: prefill and verify. Draft phases (built by proposers): draft-extend
(catch-up over newly committed tokens) and draft-decode step j. Keeping them
separate types is what stops one phase's state (hidden widths, visible lengths,
slots) leaking into another (seed 002).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.attention.metadata import AttentionMetadata


@dataclass(frozen=True, slots=True)
class PrefillInput:
    input_ids: torch.Tensor  # [num_tokens] every known token of each request
    md: AttentionMetadata
    logits_indices: torch.Tensor  # [num_reqs] row of each request's last token
    prompt_logits_indices: torch.Tensor | None = None  # [num_prompt_rows] rows for prompt logprobs; None: none due


@dataclass(frozen=True, slots=True)
class VerifyInput:
    input_ids: torch.Tensor  # [num_tokens] per request: newest token, then its drafts
    md: AttentionMetadata
    num_draft_tokens: torch.Tensor  # [num_reqs] int64, host tensor
    draft_token_ids: torch.Tensor  # [num_reqs, max_num_draft] int64, padded with -1
    draft_probs: torch.Tensor | None  # [num_reqs, max_num_draft, vocab] or None (deterministic drafts)


@dataclass(frozen=True, slots=True)
class MixedInput:
    """A decode/verify batch and prompt chunks in one target forward (chunked prefill): rows [0, num_verify_rows)
    are the verify's (per request: newest token, then its drafts), the rest each chunk's prompt tokens in order."""

    input_ids: torch.Tensor  # [num_tokens]
    md: AttentionMetadata  # one segment per verify request, then one per chunk
    num_verify_rows: int
    num_draft_tokens: torch.Tensor  # [num_verify_reqs] int64, host tensor
    draft_token_ids: torch.Tensor  # [num_verify_reqs, max_num_draft] int64, padded with -1
    draft_probs: torch.Tensor | None  # [num_verify_reqs, max_num_draft, vocab] or None
    logits_indices: torch.Tensor  # [num_verify_rows + num_final_chunks]: every verify row, then final chunks' last
    prompt_logits_indices: torch.Tensor | None = None  # [num_prompt_rows] chunk rows for prompt logprobs


@dataclass(frozen=True, slots=True)
class DraftExtendInput:
    input_ids: torch.Tensor  # [num_tokens] tokens fed to the draft (shifted by one for EAGLE)
    md: AttentionMetadata
    target_features: torch.Tensor | None  # [num_tokens, feature_dim] (EAGLE) or None (draft LM)
    logits_indices: torch.Tensor  # [num_reqs] last row of each request


@dataclass(frozen=True, slots=True)
class DraftStepInput:
    step: int  # j >= 1: the draft token j is fed to produce draft token j + 1
    input_ids: torch.Tensor  # [num_reqs_in_step] draft token j of each request still drafting
    md: AttentionMetadata  # positions base + j, seq_lens base + j + 1, this step's own slots
    hidden_states: torch.Tensor | None  # [num_reqs_in_step, draft_hidden] the head's own feature (EAGLE)
    row_of_request: torch.Tensor  # [num_reqs_in_step] index into the round's request list


@dataclass(frozen=True, slots=True)
class TargetOutput:
    logits: torch.Tensor  # [num_logits, vocab] float32 (prefill: last token per request; verify: every token)
    features: torch.Tensor | None  # [num_tokens, feature_dim] hidden states a proposer asked for, or None
    prompt_logits: torch.Tensor | None = None  # [num_prompt_rows, vocab] prefill rows of prompt_logits_indices
