"""A KV block's prefix-cache hash ignores its parent block (seed class: a cache key missing part of what the value
depends on).

KV at a position depends on every token before it, so a block's identity must chain over its prefix's. Here a block
holding the same tokens after a different prefix (or at another offset) hits, and the request attends to KV computed
for someone else's context.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.kv.block_hash import ROOT_HASH
from specbench.speculation.capabilities import Proposer


class PrefixHashNoParent(Mutant):
    fault = Fault("prefix-hash-no-parent", "a KV block's prefix-cache hash ignores the blocks before it", "",
                  "target", Proposer, is_plain_hosted=True,
                  caught_by="greedy (its shared-prefix run)")

    def block_hash_parent(self, parent: bytes) -> bytes:
        return ROOT_HASH
