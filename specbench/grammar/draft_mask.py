"""Drafting under the mask: a draft LM's step j logits masked by each constrained request's grammar state after its
drafts 0..j-1, so it proposes only tokens the verifier can accept. One small host read per draft step (the previous
step's drafts), so it is taken only for batches with a constrained request."""

from __future__ import annotations

import time

import torch

from specbench.grammar.bitmask import apply_token_bitmask, num_words


class DraftMask:
    """One round's drafting walk: handed to the proposer in ProposeInput, undone by `finish` after it drafted."""

    def __init__(self, book, requests) -> None:
        self.book = book
        self.states = {r: book.state_for(request) for r, request in enumerate(requests)
                       if request.sampling_params.grammar is not None}  # batch row -> its request's state
        self.num_walked = {r: 0 for r in self.states}
        self.refused: set[int] = set()  # rows whose previous draft the grammar refused: later rows left unmasked

    @property
    def vocab_size(self) -> int:
        """The target's vocabulary: what masked() takes logits over (a wider draft vocabulary's extra ids too)."""
        return self.book.vocab_size

    def masked(self, step: int, rows: list[int], logits: torch.Tensor, draft_ids: torch.Tensor) -> torch.Tensor:
        """logits [len(rows), draft_vocab] of draft step `step` for batch rows `rows`, masked; draft_ids
        [num_reqs, max_num_draft] the drafts so far (column step - 1 is read on the host)."""
        constrained = [i for i, r in enumerate(rows) if r in self.states]
        if not constrained:
            return logits
        start = time.perf_counter()
        try:
            return self._masked(step, rows, constrained, logits, draft_ids)
        finally:
            self.book.draft_mask_seconds += time.perf_counter() - start

    def _masked(self, step: int, rows: list[int], constrained: list[int], logits: torch.Tensor,
                draft_ids: torch.Tensor) -> torch.Tensor:
        if step > 0:
            previous = draft_ids[:, step - 1].tolist()
            for r in (rows[i] for i in constrained):
                if r not in self.refused and self.num_walked[r] == step - 1:
                    if self.states[r].consume(previous[r]):
                        self.num_walked[r] += 1
                    else:
                        self.refused.add(r)
        vocab_size = self.book.vocab_size
        bitmask = torch.full((len(rows), num_words(vocab_size)), -1, dtype=torch.int32)
        for i in constrained:
            r = rows[i]
            if r not in self.refused:
                self.states[r].fill_mask(bitmask, i)
        masked = apply_token_bitmask(logits[:, :vocab_size], bitmask)
        if logits.shape[1] == vocab_size:
            return masked
        # A draft vocabulary wider than the target's: its extra ids are never proposed to a constrained request.
        extra = logits[:, vocab_size:].clone()
        extra[torch.tensor(constrained, device=logits.device)] = float("-inf")
        return torch.cat([masked, extra], dim=1)

    def finish(self) -> None:
        """Undo the walk: each state back at its committed tokens."""
        for r, state in self.states.items():
            state.rollback(self.num_walked[r])
