"""Seed 001 (tokenspeed#318): the catch-up's visible length is not trimmed back after a partial acceptance."""

from __future__ import annotations

from specbench.faults.fault import DRAFT_SIDE, Fault, Mutant


class CatchupSeesRejected(Mutant):
    fault = Fault("catchup-sees-rejected", "catch-up visible length not trimmed after a partial acceptance",
                  "001 (tokenspeed#318)", "draft", DRAFT_SIDE)

    def __init__(self) -> None:
        self._written_end: dict[str, int] = {}  # request -> end of the draft KV its last round wrote

    def draft_kv_written(self, request_id: str, end: int) -> None:
        self._written_end[request_id] = end

    def extend_seq_lens(self, request_ids: tuple[str, ...], seq_lens: list[int],
                        block_tables: list[tuple[int, ...]], block_size: int) -> list[int]:
        # Rejected positions' KV stays visible (never past the request's blocks).
        stale = [min(self._written_end.get(r, 0), len(t) * block_size) for r, t in zip(request_ids, block_tables)]
        return [max(n, s) for n, s in zip(seq_lens, stale)]

    def free(self, request_id: str) -> None:
        self._written_end.pop(request_id, None)
