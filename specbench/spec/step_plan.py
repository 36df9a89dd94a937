"""Metadata of draft-decode step j, built fresh for every step from one plan (the seeds 000/003/004 contract).

Step j (>= 1) of a request whose step-1 query sits at position `first` queries position first + j - 1 and
sees first + j keys (INV-0), writing only its own slot. Both the draft-LM and the EAGLE proposer use this,
so the plan lives in one place; an injected fault (specbench.faults) bends it exactly as a seed bug did.
"""

from __future__ import annotations

import torch

from specbench.attention.metadata import AttentionMetadata, build_metadata
from specbench.spec.fault_hooks import mutate_step_plan


def draft_step_metadata(
    *,
    first_positions: list[int],  # [num_reqs_in_step] position of each request's step-1 query
    step: int,
    block_tables: list[tuple[int, ...]],  # [num_reqs_in_step]
    block_size: int,
    device: torch.device,
    fault=None,  # specbench.faults.Fault or None
) -> AttentionMetadata:
    positions = [p + step - 1 for p in first_positions]
    seq_lens = [p + 1 for p in positions]
    slots = None
    if fault is not None:
        plan = mutate_step_plan(fault, step, positions, seq_lens, block_tables, block_size)
        positions, seq_lens, slots = plan.positions, plan.seq_lens, plan.slot_mapping
    def rebuild(*, positions: list[int], seq_lens: list[int], slot_mapping: list[int] | None = None):
        return build_metadata(positions=positions, num_query=[1] * len(positions), seq_lens=seq_lens,
                              block_tables=block_tables, block_size=block_size, device=device,
                              slot_mapping=slot_mapping)

    md = rebuild(positions=positions, seq_lens=seq_lens, slot_mapping=slots)
    if fault is not None:
        from specbench.fault_mutants import STEP_MUTANTS

        if fault.name in STEP_MUTANTS:
            md = STEP_MUTANTS[fault.name].mutate(step, md, rebuild)
    return md
