"""An evicted block's hash stays in the prefix cache's index (seed class: stale state after reuse).

Eviction hands the block out afresh, to be overwritten by another request; a later lookup of the old content still
finds it and reads that request's KV.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class PrefixStaleAfterEvict(Mutant):
    fault = Fault("prefix-stale-after-evict", "the prefix cache keeps an evicted block's hash: later hits read "
                  "whatever reused the block", "", "target", Proposer, is_plain_hosted=True,
                  caught_by="greedy (its shared-prefix run)")

    def drops_evicted_hash(self, block_hash: bytes) -> bool:
        return False
