"""Seed 001 (tokenspeed#318): the catch-up's visible length is not trimmed back after a partial acceptance."""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.faults.path_mutant import wrap_method
from specbench.speculation.capabilities import HasDraftKV
from specbench.speculation.drafters.draft_model import DraftModelProposer


class CatchupSeesRejected(Mutant):
    fault = Fault("catchup-sees-rejected", "catch-up visible length not trimmed after a partial acceptance",
                  "001 (tokenspeed#318)", "draft", HasDraftKV)

    def __init__(self) -> None:
        self._written_end: dict[str, int] = {}  # request -> end of the draft KV its last round wrote

    def install(self, engine) -> None:
        """Learn where each round's draft KV ends: a draft LM says it when the round is verified (draft_kv_written,
        before its trim), an EAGLE head's ends where its drafting returns (the last step saw newest + k - 1 keys).
        Drafting is eager under a mutant, so every round goes through propose."""
        proposer = engine.proposer
        wrap_method(proposer, "free", self._forgetting)
        if not isinstance(proposer, DraftModelProposer):
            wrap_method(proposer, "propose", self._after_drafting)

    def draft_kv_written(self, request_id: str, end: int) -> None:
        self._written_end[request_id] = end

    def _after_drafting(self, propose):
        def recording(inp):
            proposal = propose(inp)
            for request_id, tokens, num_drafts in zip(inp.request_ids, inp.token_ids, inp.num_draft_tokens):
                if num_drafts > 0:
                    self._written_end[request_id] = len(tokens) - 1 + num_drafts - 1
            return proposal
        return recording

    def extend_seq_lens(self, request_ids: tuple[str, ...], seq_lens: list[int],
                        block_tables: list[tuple[int, ...]], block_size: int) -> list[int]:
        # Rejected positions' KV stays visible (never past the request's blocks).
        stale = [min(self._written_end.get(r, 0), len(t) * block_size) for r, t in zip(request_ids, block_tables)]
        return [max(n, s) for n, s in zip(seq_lens, stale)]

    def _forgetting(self, free):
        def forgetting(request_id: str) -> None:  # finished or preempted: its draft KV is gone
            free(request_id)
            self._written_end.pop(request_id, None)
        return forgetting
