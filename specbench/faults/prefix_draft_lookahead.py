"""On a prefix-cache hit an EAGLE / MTP drafter resumes at the whole match (seed class: draft KV not restored).

Its draft KV at p was computed from the token at p + 1: the matched prefix's last position read the first token of
the block after it, which the hit does not vouch for (the requests diverge there). The drafter must resume one block
earlier (ResumesFromCachedKV.num_resumable_tokens); here it trusts that position's draft KV. Greedy output stays
exact (drafts only steer acceptance): the draft oracle's cache-free recompute catches it.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import ConsumesTargetFeatures


class PrefixDraftLookahead(Mutant):
    fault = Fault("prefix-draft-lookahead", "an EAGLE/MTP drafter resumes a prefix-cache hit at the whole match, "
                  "trusting draft KV that read the next block's first token", "", "draft", ConsumesTargetFeatures)

    def resumable_tokens(self, num_matched: int, num_resumable: int) -> int:
        return num_matched
