"""Target-side, logprobs only: a speculative round reads each accepted draft's logprob from the next verify row
(the distribution of the token after it), vLLM #34497's bug class. Output tokens are untouched, so only a
logprobs check (k > 0 vs k = 0, or a fresh forward) can catch it; plain decoding (no drafts) is unaffected."""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class LogprobsRowShift(Mutant):
    fault = Fault("logprobs-row-shift", "an accepted draft's logprob is read from the verify row after its own",
                  "", "logprobs", Proposer)

    def logprob_rows(self, num_draft_tokens: list[int]) -> list[int] | None:
        rows: list[int] = []
        for num in num_draft_tokens:
            first = len(rows)
            rows.extend(first + min(j + 1, num) for j in range(num + 1))  # the last row (the bonus's) stays
        return rows
