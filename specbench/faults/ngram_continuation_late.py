"""proposer.ngram: the prompt-lookup draft is the continuation one token after the matched n-gram (seed class:
off-by-one positions).

The drafts must be the tokens that followed the earlier occurrence of the context's suffix n-gram. Here the
continuation starts one token late, so a repeating context (where n-gram drafting pays) is drafted shifted by
one. Outputs stay lossless; acceptance collapses.
"""

from __future__ import annotations

import numpy as np
import torch

from specbench.faults.fault import Fault
from specbench.faults.path_mutant import PathMutant, wrap_method
from specbench.spec.ngram_lookup import propose_ngram
from specbench.spec.proposer import DraftProposal


class NgramContinuationLate(PathMutant):
    fault = Fault("ngram-continuation-late", "the n-gram draft starts one token after the match's continuation",
                  "003 (off-by-one positions)", "draft", ("ngram",), path="proposer.ngram")

    def install(self, engine) -> None:
        proposer = engine.proposer
        wrap_method(proposer, "propose", lambda propose: lambda inp: _late_proposal(proposer, inp))


def _late_proposal(proposer, inp) -> DraftProposal:
    drafts = []
    for tokens, n in zip(inp.token_ids, inp.num_draft_tokens):
        found = propose_ngram(np.asarray(tokens, dtype=np.int64), min_n=proposer.min_n, max_n=proposer.max_n,
                              num_draft_tokens=n + 1) if n > 0 else np.empty(0, dtype=np.int64)
        drafts.append(found[1:])  # the continuation skips its first token
    table = torch.full((len(drafts), max((len(d) for d in drafts), default=0)), -1, dtype=torch.int64)
    for r, d in enumerate(drafts):
        table[r, : len(d)] = torch.from_numpy(d)
    return DraftProposal(table.to(proposer.device), tuple(len(d) for d in drafts), None)
