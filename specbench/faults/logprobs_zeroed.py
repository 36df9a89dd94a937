"""Logprobs only: every token a speculative round emits besides its last (the accepted drafts) reports logprob 0.0
and no alternatives, llama.cpp #27972's class (a speculating llama-server sends 0.0 without top-n for accepted
draft tokens).

Tokens, draft counts and prompt logprobs are unchanged, so greedy checks, acceptance and accuracy all pass it; the
gate's logprobs stage must catch it (its no-reference invariants: logprobs of a real distribution are not all
exactly 0.0, the chosen token equals its own top-n entry; and k > 0 vs k = 0). A plain engine emits one token per
step and is unaffected.
"""

from __future__ import annotations

from specbench.engine.token_logprob import TokenLogprob
from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class LogprobsZeroed(Mutant):
    fault = Fault("logprobs-zeroed", "accepted draft tokens report logprob 0.0 without alternatives", "",
                  "logprobs", Proposer)

    def committed_logprobs(self, token_logprobs: list[TokenLogprob] | None) -> list[TokenLogprob] | None:
        if token_logprobs is not None and len(token_logprobs) > 1:
            return [TokenLogprob(e.token_id, 0.0, 1, ()) for e in token_logprobs[:-1]] + [token_logprobs[-1]]
        return token_logprobs
