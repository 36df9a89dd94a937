"""A drafter that knows the answer: it drafts each request's known greedy continuation (HF transformers'), with one
draft spoiled at a position that cycles over the rounds and requests, so rounds reject at every position, accept all
k, and draft nothing, all mixed in one batch. Greedy output must still be the continuation; the engine's rollback is
exercised at every accepted length."""

from __future__ import annotations

import numpy as np
import torch

from specbench.speculation.drafters.ngram import NgramProposer
from specbench.speculation.proposer import DraftProposal, ProposeInput


class ScriptedProposer(NgramProposer):
    def __init__(self, prompts: list[list[int]], continuations: list[list[int]], vocab_size: int,
                 device: torch.device) -> None:
        super().__init__(1, 1, device)
        self.known = [(tuple(p), list(c)) for p, c in zip(prompts, continuations)]
        self.vocab_size = vocab_size
        self.num_rounds = 0
        self.accepted_lengths: set[int] = set()  # the patterns drafted: spoiled position, k = all good, -1 = none

    def _continuation(self, tokens: tuple[int, ...]) -> tuple[int, list[int]]:
        for prompt, continuation in self.known:
            if tokens[: len(prompt)] == prompt:
                return len(tokens) - len(prompt), continuation
        raise AssertionError("a request the script does not know")

    def propose(self, inp: ProposeInput) -> DraftProposal:
        drafts = []
        for r, (tokens, n) in enumerate(zip(inp.token_ids, inp.num_draft_tokens)):
            done, continuation = self._continuation(tuple(tokens))
            truth = list(continuation[done : done + n])
            pattern = (self.num_rounds + r) % (n + 2)  # < n: spoil that draft; n: all good; n + 1: draft none
            if pattern == n + 1 or not truth:
                drafts.append([])
                self.accepted_lengths.add(-1)
                continue
            if pattern < len(truth):
                truth[pattern] = (truth[pattern] + 1) % self.vocab_size
            self.accepted_lengths.add(min(pattern, len(truth)))
            drafts.append(truth)
        self.num_rounds += 1
        width = max((len(d) for d in drafts), default=0)
        table = np.full((len(drafts), width), -1, dtype=np.int64)
        for r, d in enumerate(drafts):
            table[r, : len(d)] = d
        return DraftProposal(torch.from_numpy(table).to(self.device), tuple(len(d) for d in drafts), None)


def install_scripted(llm, prompts, continuations) -> ScriptedProposer:
    """Swap an n-gram engine's proposer for the script (the scheduler still asks k drafts per request)."""
    engine = llm.engine
    proposer = ScriptedProposer(prompts, continuations, engine.vocab_size, engine.device)
    engine.proposer = proposer
    return proposer
