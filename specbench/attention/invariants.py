"""Debug invariants checked on every attention forward when enabled.

Enabled per engine by `EngineConfig.debug_invariants` (handed to backends and proposers when the engine is
built; the test suite turns it on). They
are the checks that catch the seed bug class:
- INV-0: each query's position equals the number of keys it sees minus one
  (off-by-one draft positions, seq_lens not advanced per draft step, catch-up
  seeing rejected positions).
- INV-SLOT: each token writes exactly the slot of its own position in its own
  request's block table, and no two tokens write the same slot (a step using
  another step's slots, or a full [bs x steps] slot tensor). Slot -1 marks a padding query
  (it writes nothing and its output is unused); padding may only lead a request's queries.
- INV-FIELDS: the other fields kernels read (maximum lengths, the device tensors) agree with the host copies.
- INV-REQ (draft steps): the metadata against an independent source, each request's committed length and the
  step index, recomputed by the proposer: a stale or shifted but self-consistent plan fails here.
Per layer, in their own modules: INV-KIND (kind_invariants.py, each windowed layer's first visible keys) and
INV-SCORE (score_invariants.py, a sink / soft-capped / rescaled layer's output against the reference with its own
parameters).
"""

from __future__ import annotations

import torch

from specbench.attention.invariant_violation import InvariantViolation
from specbench.attention.metadata import PADDING_SLOT, AttentionMetadata, slot_of
from specbench.attention.tree_mask import check_tree_positions_and_slots

__all__ = ["check_kernel_fields", "check_metadata", "check_positions_and_slots", "check_step_against_requests"]


def check_metadata(md: AttentionMetadata, where: str = "") -> None:
    check_kernel_fields(md, where)
    check_positions_and_slots(md, where)


def check_positions_and_slots(md: AttentionMetadata, where: str = "") -> None:
    """INV-0 and INV-SLOT: the metadata against itself (a tree forward: INV-TREE, attention/tree_mask.py)."""
    if md.tree is not None:
        check_tree_positions_and_slots(md, where)
        return
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


def check_kernel_fields(md: AttentionMetadata, where: str = "") -> None:
    """INV-FIELDS: the fields kernels read beside the host copies the checks above use. The maximum lengths bound
    every request's queries and keys (a kernel loops to them: a short one drops keys), and the device tensors hold
    what the host copies say (skipped inside a CUDA-graph capture, where reading them back is not allowed)."""
    cu = md.query_start_loc_cpu
    longest_query = max((cu[r + 1] - cu[r] for r in range(md.num_reqs)), default=0)
    if md.max_query_len < longest_query or md.max_seq_len < max(md.seq_lens_cpu, default=0):
        raise InvariantViolation(
            f"{where}: INV-FIELDS violated: max_query_len {md.max_query_len} / max_seq_len {md.max_seq_len} below the "
            f"longest request ({longest_query} queries / {max(md.seq_lens_cpu, default=0)} keys)"
        )
    if md.positions.is_cuda and torch.cuda.is_current_stream_capturing():
        return
    # Two reads (per-token and per-request fields), compared with the host copies laid out the same way.
    per_token = torch.cat([md.positions.view(-1).long(), md.slot_mapping.view(-1).long()]).tolist()
    if per_token != [*md.positions_cpu, *md.slot_mapping_cpu]:
        raise InvariantViolation(f"{where}: INV-FIELDS violated: device positions / slot_mapping differ from their "
                                 f"host copies")
    width = md.block_tables.shape[1] if md.block_tables.dim() == 2 else 0
    per_request = torch.cat([md.query_start_loc.view(-1).long(), md.seq_lens.view(-1).long(),
                             md.block_tables.reshape(-1).long()]).tolist()
    tables = [b for t in md.block_tables_cpu for b in (*t[:width], *(0,) * (width - len(t)))]
    if per_request != [*cu, *md.seq_lens_cpu, *tables]:
        raise InvariantViolation(f"{where}: INV-FIELDS violated: device query_start_loc / seq_lens / block_tables "
                                 f"differ from their host copies")


def check_step_against_requests(md: AttentionMetadata, positions: list[int], block_tables: list, where: str) -> None:
    """INV-REQ: a draft step's metadata against what the requests say it must be, recomputed by the caller from each
    request's committed length and the step index (not from the metadata): one query per request at `positions[r]`
    seeing positions[r] + 1 keys, the request's own block-table row, its own slot."""
    expected_seq = [p + 1 for p in positions]
    got = (list(md.positions_cpu), list(md.seq_lens_cpu), list(md.query_start_loc_cpu))
    want = (positions, expected_seq, list(range(len(positions) + 1)))
    for name, g, w in zip(("positions", "seq_lens", "query_start_loc"), got, want):
        if g != w:
            raise InvariantViolation(f"{where}: INV-REQ violated: {name} {g[:8]}, the requests' state says {w[:8]}")
    for r, (table, pos) in enumerate(zip(block_tables, positions)):
        needed = tuple(table[: -(-(pos + 1) // md.block_size)])
        if tuple(md.block_tables_cpu[r][: len(needed)]) != needed:
            raise InvariantViolation(f"{where}: INV-REQ violated: request {r} block-table row "
                                     f"{md.block_tables_cpu[r][:8]}, its own is {needed[:8]}")
        if md.slot_mapping_cpu[r] != slot_of(table, pos, md.block_size):
            raise InvariantViolation(f"{where}: INV-REQ violated: request {r} writes slot {md.slot_mapping_cpu[r]}, "
                                     f"its position {pos} owns slot {slot_of(table, pos, md.block_size)}")
    if md.max_seq_len < max(expected_seq, default=0):
        raise InvariantViolation(f"{where}: INV-REQ violated: max_seq_len {md.max_seq_len} < {max(expected_seq)}")
