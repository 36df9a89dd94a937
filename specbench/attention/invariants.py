"""Debug invariants checked on every attention forward when enabled.

Enabled by `SPECBENCH_DEBUG_INVARIANTS=1` (the test suite turns it on). They
are the checks that catch the seed bug class:
- INV-0: each query's position equals the number of keys it sees minus one
  (off-by-one draft positions, seq_lens not advanced per draft step, catch-up
  seeing rejected positions).
- INV-SLOT: each token writes exactly the slot of its own position in its own
  request's block table, and no two tokens write the same slot (a step using
  another step's slots, or a full [bs x steps] slot tensor). Slot -1 marks a padding query
  (it writes nothing and its output is unused); padding may only lead a request's queries.
"""

from __future__ import annotations

import os

from specbench.attention.metadata import PADDING_SLOT, AttentionMetadata, slot_of


class InvariantViolation(AssertionError):
    pass


def invariants_enabled() -> bool:
    return os.environ.get("SPECBENCH_DEBUG_INVARIANTS", "0") not in ("", "0", "false", "False")


def check_metadata(md: AttentionMetadata, where: str = "") -> None:
    cu = md.query_start_loc_cpu
    if len(md.positions_cpu) != cu[-1] or len(md.slot_mapping_cpu) != cu[-1]:
        raise InvariantViolation(
            f"{where}: {len(md.positions_cpu)} positions / {len(md.slot_mapping_cpu)} slots for {cu[-1]} query tokens"
        )
    seen: set[int] = set()
    for r in range(md.num_reqs):
        num_query = cu[r + 1] - cu[r]
        seq_len = md.seq_lens_cpu[r]
        if num_query > seq_len:
            raise InvariantViolation(f"{where}: request {r} has {num_query} queries but only {seq_len} keys")
        table = md.block_tables_cpu[r]
        if len(table) * md.block_size < seq_len:
            raise InvariantViolation(
                f"{where}: request {r} sees {seq_len} keys but owns {len(table)} blocks of {md.block_size}"
            )
        for j in range(num_query):
            t = cu[r] + j
            visible = seq_len - num_query + j + 1
            pos = md.positions_cpu[t]
            if pos != visible - 1:
                raise InvariantViolation(
                    f"{where}: INV-0 violated: request {r} query {j} at position {pos} sees {visible} keys "
                    f"(expected position {visible - 1})"
                )
            slot = md.slot_mapping_cpu[t]
            if slot == PADDING_SLOT:
                if j > 0 and md.slot_mapping_cpu[t - 1] != PADDING_SLOT:
                    raise InvariantViolation(
                        f"{where}: request {r} query {j} (position {pos}) writes nothing after a query that wrote: "
                        "padding may only lead a request's queries"
                    )
                continue
            expected_slot = slot_of(table, pos, md.block_size)
            if slot != expected_slot:
                raise InvariantViolation(
                    f"{where}: INV-SLOT violated: request {r} query {j} (position {pos}) writes slot {slot}, "
                    f"its own slot is {expected_slot}"
                )
            if slot in seen:
                raise InvariantViolation(f"{where}: INV-SLOT violated: slot {slot} written twice in one step")
            seen.add(slot)
