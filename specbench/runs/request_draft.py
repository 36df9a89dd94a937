"""The per-request speculative counts a server sent in its response body (parsed in backends/request_draft.py)."""

from __future__ import annotations

from dataclasses import dataclass

LLAMACPP_TIMINGS = "llamacpp:timings"
VLLM_METRICS = "vllm:metrics.speculative_decoding"
SGLANG_META = "sglang:meta_info"


@dataclass(frozen=True, slots=True)
class RequestDraft:
    source: str  # LLAMACPP_TIMINGS | VLLM_METRICS | SGLANG_META
    num_draft_rounds: int | None  # verify rounds with drafts; None where the server does not say
    num_draft_tokens: int | None
    num_accepted_tokens: int | None
    num_accepted_per_pos: tuple[int, ...]  # [num_positions] rounds accepting position k; () where not sent
