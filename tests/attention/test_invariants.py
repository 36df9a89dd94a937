"""The debug invariants fire on exactly the seed bug shapes."""

import pytest
import torch

from specbench.attention.invariants import check_metadata
from specbench.attention.invariant_violation import InvariantViolation
from specbench.attention.metadata import build_metadata, slot_of

CPU = torch.device("cpu")
TABLES = [[5, 2, 9], [1, 7]]


def _md(positions, num_query, seq_lens, slot_mapping=None):
    return build_metadata(positions=positions, num_query=num_query, seq_lens=seq_lens, block_tables=TABLES,
                          block_size=4, device=CPU, slot_mapping=slot_mapping)


def test_correct_prefill_verify_and_draft_step_pass():
    check_metadata(_md([0, 1, 2, 0, 1], [3, 2], [3, 2]))  # prefill
    check_metadata(_md([7, 8, 9, 10, 4, 5], [4, 2], [11, 6]))  # verify: k + 1 queries each
    check_metadata(_md([9, 5], [1, 1], [10, 6]))  # draft step: position = visible - 1


def test_position_off_by_one_is_inv0():
    with pytest.raises(InvariantViolation, match="INV-0"):
        check_metadata(_md([10, 5], [1, 1], [10, 6]))  # seed 003: +1 position, same visible keys


def test_visible_length_not_advanced_is_inv0():
    with pytest.raises(InvariantViolation, match="INV-0"):
        check_metadata(_md([9, 5], [1, 1], [9, 6]))  # seed 000: seq_lens not advanced by step + 1


def test_catchup_seeing_rejected_is_inv0():
    with pytest.raises(InvariantViolation, match="INV-0"):
        check_metadata(_md([6, 7, 4], [2, 1], [10, 5]))  # seed 001: visible length not trimmed


def test_wrong_slot_is_inv_slot():
    md_ok = _md([9, 5], [1, 1], [10, 6])
    wrong = list(md_ok.slot_mapping_cpu)
    wrong[0] = slot_of(TABLES[0], 8, 4)  # another step's slot
    with pytest.raises(InvariantViolation, match="INV-SLOT"):
        check_metadata(_md([9, 5], [1, 1], [10, 6], slot_mapping=wrong))


def test_duplicate_slot_is_inv_slot():
    with pytest.raises(InvariantViolation):
        check_metadata(_md([0, 1, 0, 0], [2, 2], [2, 2]))  # second request writes position 0 twice
