"""Metadata of draft-decode step j, built fresh for every step from one plan (the seeds 000/003/004 contract).

Step j (>= 1) of a request whose step-1 query sits at position `first` queries position first + j - 1 and
sees first + j keys (INV-0), writing only its own slot. Both the draft-LM and the EAGLE proposer use this,
so the plan lives in one place; the hooks (specbench.runtime.hooks) see it before the metadata is built.
"""

from __future__ import annotations

import torch

from specbench.attention.metadata import AttentionMetadata, build_metadata
from specbench.runtime.hooks import NO_HOOKS, PhaseHooks, StepPlan


def draft_step_metadata(
    *,
    first_positions: list[int],  # [num_reqs_in_step] position of each request's step-1 query
    step: int,
    block_tables: list[tuple[int, ...]],  # [num_reqs_in_step]
    block_size: int,
    device: torch.device,
    hooks: PhaseHooks = NO_HOOKS,
) -> AttentionMetadata:
    positions = [p + step - 1 for p in first_positions]
    plan = hooks.step_plan(step, StepPlan(positions, [p + 1 for p in positions], None), block_tables, block_size)
    return build_metadata(
        positions=plan.positions,
        num_query=[1] * len(plan.positions),
        seq_lens=plan.seq_lens,
        block_tables=block_tables,
        block_size=block_size,
        device=device,
        slot_mapping=plan.slot_mapping,
    )
