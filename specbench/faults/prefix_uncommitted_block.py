"""The prefix cache registers a request's blocks up to its newest token, whose KV is not written yet (seed class:
a shared block written after it was shared).

Registration must stop at the committed KV (num_cached_tokens): the newest token's KV is written by the next step, in
place, into a block other requests may already read; and a request that finishes never writes its last token's KV,
so a multi-turn follow-up hitting that block reads a stale slot (the scheduler refuses the in-place write first). It
also ignores how far the drafter's own KV is valid: with EAGLE / MTP, whose cache keys cover the next token (so the
newest position is never hashed), it registers blocks holding draft-step scratch, which the draft oracle sees.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class PrefixUncommittedBlock(Mutant):
    fault = Fault("prefix-uncommitted-block", "the prefix cache registers blocks holding the newest token, whose KV "
                  "is not written yet", "", "target", Proposer, is_plain_hosted=True,
                  caught_by="greedy (its shared-prefix run); oracle for EAGLE / MTP")

    def cacheable_tokens(self, request_id: str, num_final: int, num_tokens: int) -> int:
        return num_tokens
