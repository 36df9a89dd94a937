"""Mutable per-request state owned by the scheduler and engine."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import torch

from specbench.engine.token_logprob import TokenLogprob
from specbench.engine.stats import RequestStats
from specbench.sampling_params import SamplingParams


class RequestStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class Request:
    request_id: str
    prompt_token_ids: list[int]
    sampling_params: SamplingParams
    stats: RequestStats
    prompt_text: str | None = None
    generator: torch.Generator | None = None
    output_token_ids: list[int] = field(default_factory=list)
    block_table: list[int] = field(default_factory=list)
    # Leading entries of block_table already released (out of every layer's window; the scheduler's to set).
    num_released_blocks: int = 0
    # Target KV holds positions [0, num_cached_tokens). While decoding this is
    # num_tokens - 1: the newest token is not in the cache until the next forward.
    num_cached_tokens: int = 0
    # Positions its current (re)prefill must cover: num_tokens when admitted (prompt, plus output for a preempted
    # one). Below it, num_cached_tokens marks a partially prefilled request whose next chunk starts there
    # (chunked prefill, engine/chunk_schedule.py); only its final chunk samples a token.
    num_prefill_tokens: int = 0
    # Prompt logprobs of the chunks run so far ([positions predicted so far], the first prompt token's None left
    # out), until the final chunk sets prompt_logprobs (engine/logprobs.py chunk_prompt_logprobs).
    partial_prompt_logprobs: list[TokenLogprob] = field(default_factory=list)
    # Prefix caching (engine/prefix_reuse.py): leading table entries already registered in the prefix cache, or
    # found there (the scheduler's to reset when the table is freed); the chained hashes of the request's full
    # blocks of tokens so far, and the extra key they were hashed under.
    num_registered_blocks: int = 0
    block_hashes: list[bytes] = field(default_factory=list)
    block_hashes_key: bytes = b""
    status: RequestStatus = RequestStatus.WAITING
    finish_reason: str | None = None
    output_text: str | None = None  # set at finish (truncated at a stop string)
    # Only when sampling_params asks (engine/logprobs.py): [num_output_tokens], and [num_prompt_tokens] (first None).
    output_logprobs: list[TokenLogprob] = field(default_factory=list)
    prompt_logprobs: tuple[TokenLogprob | None, ...] | None = None  # set at the first prefill

    @property
    def token_ids(self) -> list[int]:
        return self.prompt_token_ids + self.output_token_ids

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def is_prefilling(self) -> bool:
        """Admitted, with prompt chunks still to run (chunked prefill): no token to decode yet."""
        return self.num_cached_tokens < self.num_prefill_tokens

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    @property
    def arrival_time(self) -> float:
        return self.stats.arrival_time
