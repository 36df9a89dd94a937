"""Prompt-lookup (n-gram) proposer: drafts are copied from earlier context on the host."""

from __future__ import annotations

import numpy as np
import torch

from specbench.speculation.capabilities import Proposer
from specbench.speculation.drafters.ngram_lookup import propose_ngram
from specbench.speculation.proposer import DraftProposal, ProposeInput


class NgramProposer(Proposer):
    """The core only: no draft model (no draft KV, graphs or logits to record), no target features."""

    name = "ngram"

    def __init__(self, min_n: int, max_n: int, device: torch.device) -> None:
        self.min_n = min_n
        self.max_n = max_n
        self.device = device

    def propose(self, inp: ProposeInput) -> DraftProposal:
        drafts = [
            propose_ngram(np.asarray(tokens, dtype=np.int64), min_n=self.min_n, max_n=self.max_n, num_draft_tokens=n)
            if n > 0
            else np.empty(0, dtype=np.int64)
            for tokens, n in zip(inp.token_ids, inp.num_draft_tokens)
        ]
        max_num_draft = max((len(d) for d in drafts), default=0)
        table = np.full((len(drafts), max_num_draft), -1, dtype=np.int64)
        for r, d in enumerate(drafts):
            table[r, : len(d)] = d
        ids = torch.from_numpy(table)
        if self.device.type == "cuda":
            ids = ids.pin_memory().to(self.device, non_blocking=True)
        return DraftProposal(ids, tuple(len(d) for d in drafts), None)

    def on_verified(self, request_ids: tuple[str, ...], num_accepted: tuple[int, ...]) -> None:
        pass

    def free(self, request_id: str) -> None:
        pass

    def describe(self) -> dict[str, object]:
        return {"method": "ngram", "ngram_min": self.min_n, "ngram_max": self.max_n}
