"""Target-side classic: verify writes each token's KV to the slot of the next position."""

from __future__ import annotations

from specbench.attention.metadata import slot_of
from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class VerifyKvOffByOne(Mutant):
    fault = Fault("verify-kv-off-by-one", "verify writes each token's KV to the slot of the next position",
                  "", "target", Proposer)

    def verify_slot_mapping(self, block_tables: list[list[int]], positions: list[int], num_query: list[int],
                            block_size: int) -> list[int] | None:
        slots: list[int] = []
        t = 0
        for table, n in zip(block_tables, num_query):
            end = len(table) * block_size
            for pos in positions[t : t + n]:
                shifted = pos + 1  # a neighbour's slot, unless that falls outside the request's blocks
                slots.append(slot_of(table, shifted if 0 <= shifted < end else pos, block_size))
            t += n
        return slots
