"""proposer.ngram: the prompt-lookup draft is the continuation one token after the matched n-gram (seed class:
off-by-one positions).

The drafts must be the tokens that followed the earlier occurrence of the context's suffix n-gram. Here the
continuation starts one token late, so a repeating context (where n-gram drafting pays) is drafted shifted by
one. Outputs stay lossless; acceptance drops.
"""

from __future__ import annotations

from dataclasses import replace

from specbench.faults.fault import Fault
from specbench.faults.path_mutant import PathMutant, wrap_method
from specbench.speculation.drafters.ngram import NgramProposer


class NgramContinuationLate(PathMutant):
    fault = Fault("ngram-continuation-late", "the n-gram draft starts one token after the match's continuation",
                  "003 (off-by-one positions)", "draft", NgramProposer, path="proposer.ngram")

    def install(self, engine) -> None:
        wrap_method(engine.proposer, "propose", _one_token_late)


def _one_token_late(propose):
    def late(inp):
        # One draft more from the real lookup, its first dropped: the continuation of the match, one token on.
        longer = propose(replace(inp, num_draft_tokens=tuple(n + 1 if n else 0 for n in inp.num_draft_tokens)))
        num_drafts = tuple(max(0, m - 1) for m in longer.num_draft_tokens)  # [num_reqs], rows stay -1 padded
        return replace(longer, draft_token_ids=longer.draft_token_ids[:, 1:], num_draft_tokens=num_drafts)
    return late
