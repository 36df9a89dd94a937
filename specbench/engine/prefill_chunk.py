"""One request's slice of a prefill that runs inside a step (chunked prefill: engine/scheduler.py schedule_mixed)."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.engine.request import Request


@dataclass(frozen=True, slots=True)
class PrefillChunk:
    """Positions [start, start + num_tokens) of `request`'s (re)prefill: its tokens there are fed at those positions
    and their K/V written. Starts at the request's num_cached_tokens (0, or a prefix-cache hit's length), never past
    num_prefill_tokens: drafts are never part of a chunk (vLLM #30618)."""

    request: Request
    start: int
    num_tokens: int

    @property
    def end(self) -> int:
        return self.start + self.num_tokens

    @property
    def is_final(self) -> bool:
        """The chunk reaching the last prefill position: the only one whose last row samples a token."""
        return self.end == self.request.num_prefill_tokens
