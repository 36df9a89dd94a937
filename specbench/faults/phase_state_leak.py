"""Seed 002 (sglang#24859): the catch-up reuses the previous draft-decode step's input.

A draft LM's step input is its metadata: the next catch-up runs on it when the token counts match. An EAGLE
step is also fed a hidden state: the next catch-up's last row gets the previous step's (draft-own) hidden.
"""

from __future__ import annotations

import torch

from specbench.attention.metadata import AttentionMetadata
from specbench.faults.fault import Fault, Mutant
from specbench.faults.path_mutant import wrap_method
from specbench.speculation.capabilities import HasDraftKV


class PhaseStateLeak(Mutant):
    fault = Fault("phase-state-leak", "draft-extend reuses the previous draft-decode step's input (metadata / hidden)",
                  "002 (sglang#24859)", "draft", HasDraftKV)

    def __init__(self) -> None:
        self._last_step_md: AttentionMetadata | None = None  # draft LM: the last draft-decode step's metadata
        self._last_step_hidden: dict[str, torch.Tensor] = {}  # EAGLE: request -> last step's input hidden [H]

    def step_metadata(self, step: int, request_ids: tuple[str, ...], md: AttentionMetadata,
                      hidden: torch.Tensor | None) -> AttentionMetadata:
        if hidden is None:
            self._last_step_md = md
        else:
            for request_id, row in zip(request_ids, hidden):
                self._last_step_hidden[request_id] = row
        return md

    def extend_metadata(self, md: AttentionMetadata) -> AttentionMetadata:
        leaked = self._last_step_md
        return leaked if leaked is not None and leaked.num_tokens == md.num_tokens else md

    def extend_hidden(self, request_ids: tuple[str, ...], hidden: torch.Tensor,
                      last_rows: torch.Tensor) -> torch.Tensor:
        hidden = hidden.clone()
        for i, request_id in enumerate(request_ids):
            leaked = self._last_step_hidden.get(request_id)
            if leaked is not None:
                hidden[last_rows[i]] = leaked
        return hidden

    def install(self, engine) -> None:
        def make_free(free):
            def forgetting(request_id: str) -> None:  # finished or preempted
                free(request_id)
                self._last_step_hidden.pop(request_id, None)
            return forgetting

        wrap_method(engine.proposer, "free", make_free)
