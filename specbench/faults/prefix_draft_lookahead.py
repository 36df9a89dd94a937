"""An EAGLE / MTP drafter's cached blocks are keyed without the token after them (seed class: draft KV not restored).

Its draft KV at p was computed from the token at p + 1, so a block's last position read the next block's first
token: two requests sharing a block (a system prompt) but not the token after it hold different draft KV there. Here
the key covers the block's tokens only, and a request hitting a block another request registered resumes on draft
KV computed for someone else's next token. Greedy output stays exact (drafts only steer acceptance): the draft
oracle's cache-free recompute catches it.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import ConsumesTargetFeatures


class PrefixDraftLookahead(Mutant):
    fault = Fault("prefix-draft-lookahead", "an EAGLE/MTP drafter's cached blocks are keyed without the next token "
                  "their draft KV read", "", "draft", ConsumesTargetFeatures)

    def draft_kv_lookahead(self, lookahead: int) -> int:
        return 0
