"""Issue 15 item 1: INV-0 / INV-SLOT check the metadata against itself, so a self-consistent wrong plan passes them;
INV-REQ (against the requests' committed length and the step index) and INV-FIELDS (the maximum lengths and device
tensors kernels read) catch the mutants built for that blind spot."""

from __future__ import annotations

import pytest
import torch

from specbench.attention.invariant_violation import InvariantViolation
from specbench.attention.invariants import (
    check_kernel_fields, check_positions_and_slots, check_step_against_requests,
)
from specbench.faults import build_hooks
from specbench.speculation.drafters.step_plan import draft_step_metadata

TABLES = [(3, 7, 1, 9, 4, 2), (5, 0, 8, 6, 11, 10)]
NEWEST = [9, 14]  # committed length - 1 per request


def _step(j: int, fault: str | None):
    """Draft-LM step j: the query at newest + j, through the hooks in the proposer's order (plan, then metadata)."""
    hooks = build_hooks(fault)
    md = draft_step_metadata(first_positions=[n + 1 for n in NEWEST], step=j, block_tables=TABLES, block_size=4,
                             device=torch.device("cpu"), hooks=hooks)
    return hooks.step_metadata(j, ("r0", "r1"), md, None)


@pytest.mark.parametrize("fault", ["draft-step-shifted", "draft-max-seq-len-stale"])
def test_self_consistent_wrong_steps_pass_the_old_invariants_and_fail_the_new(fault):
    for j in (1, 2, 3):
        check_positions_and_slots(_step(j, fault), "old")  # INV-0 / INV-SLOT: no complaint
    md = _step(3, fault)
    with pytest.raises(InvariantViolation, match="INV-REQ"):
        check_step_against_requests(md, [n + 3 for n in NEWEST], TABLES, "draft step 3")


def test_short_max_seq_len_and_device_drift_fail_inv_fields():
    with pytest.raises(InvariantViolation, match="INV-FIELDS.*max_seq_len"):
        check_kernel_fields(_step(3, "draft-max-seq-len-stale"))
    import dataclasses

    md = _step(2, None)
    drifted = dataclasses.replace(md, seq_lens=md.seq_lens + 1)  # the device tensor a kernel reads, stale
    check_positions_and_slots(drifted)
    with pytest.raises(InvariantViolation, match="INV-FIELDS.*seq_lens"):
        check_kernel_fields(drifted)


def test_clean_steps_pass_every_invariant():
    for j in (1, 2, 3):
        md = _step(j, None)
        check_kernel_fields(md)
        check_positions_and_slots(md)
        check_step_against_requests(md, [n + j for n in NEWEST], TABLES, f"draft step {j}")


def test_wrong_block_table_row_fails_inv_req():
    md = _step(1, None)
    swapped = [TABLES[1], TABLES[0]]
    with pytest.raises(InvariantViolation, match="INV-REQ.*block-table row"):
        check_step_against_requests(md, [n + 1 for n in NEWEST], swapped, "draft step 1")
