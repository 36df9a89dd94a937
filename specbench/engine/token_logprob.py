"""One token's log-probability under the target (engine/logprobs.py computes it); torch-free, as RequestOutput is."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    token_id: int
    logprob: float  # log p_target(token | everything before it)
    rank: int  # 1 + the number of tokens strictly more likely (1: the target's argmax)
    top: tuple[tuple[int, float], ...]  # [n] (token id, logprob), most likely first; n = the request's top-n
