"""What a proposer is handed and what it hands back, per round. The interfaces (the core `Proposer` and the
capabilities a proposer class declares) are in capabilities.py."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.speculation.sampling import SamplingTensors


@dataclass(frozen=True, slots=True)
class ProposeInput:
    request_ids: tuple[str, ...]  # [num_reqs]
    token_ids: tuple[tuple[int, ...], ...]  # [num_reqs][num_tokens_r] committed tokens incl. the newest
    num_draft_tokens: tuple[int, ...]  # [num_reqs] drafts wanted (0 allowed)
    block_tables: tuple[tuple[int, ...], ...]  # [num_reqs][num_blocks_r], cover newest + drafts
    sampling: SamplingTensors  # the requests' sampling settings (drafts must use the same warping)
    # Grammar-constrained requests in the batch (grammar/draft_mask.py): a drafter that samples its own logits may
    # mask step j's with it (masked(j, rows, logits, draft_ids)); None: nothing constrained.
    draft_mask: object | None = None


@dataclass(frozen=True, slots=True)
class DraftProposal:
    draft_token_ids: torch.Tensor  # [num_reqs, max_num_draft] int64, padded with -1
    num_draft_tokens: tuple[int, ...]  # [num_reqs] may be fewer than asked (n-gram finds no match)
    draft_probs: torch.Tensor | None  # [num_reqs, max_num_draft, vocab] or None for deterministic drafts
    # [num_reqs, max_num_draft] int64 request-local parent of each draft, -1 = the root (the newest committed
    # token), padded with -1; None = a chain (parent i - 1). Set only by tree rounds (speculation/tree/propose.py).
    parents: torch.Tensor | None = None
