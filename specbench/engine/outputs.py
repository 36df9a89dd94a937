"""What the engine hands back for a finished request."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.engine.stats import RequestStats
from specbench.engine.token_logprob import TokenLogprob


@dataclass(frozen=True)
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: tuple[int, ...]
    output_token_ids: tuple[int, ...]
    text: str | None  # None when the engine has no tokenizer (token-id prompts on dummy presets)
    finish_reason: str  # "stop" (EOS or stop string) | "length"
    stats: RequestStats
    # The target's raw logprobs (SamplingParams.logprobs / prompt_logprobs; engine/logprobs.py); None: not asked.
    logprobs: tuple[TokenLogprob, ...] | None = None  # [num_output_tokens]
    prompt_logprobs: tuple[TokenLogprob | None, ...] | None = None  # [num_prompt_tokens]; the first is None
