"""Seed 003 (sglang#25015): draft-decode RoPE positions advanced once too often."""

from __future__ import annotations

from specbench.attention.metadata import slot_of
from specbench.faults.fault import Fault, Mutant
from specbench.runtime.hooks import StepPlan
from specbench.speculation.capabilities import HasDraftKV


class DraftPositionsOffByOne(Mutant):
    fault = Fault("draft-positions-off-by-one", "draft-decode step positions +1 while the visible keys are unchanged",
                  "003 (sglang#25015)", "draft", HasDraftKV)

    def step_plan(self, step: int, plan: StepPlan, block_tables: list[tuple[int, ...]], block_size: int) -> StepPlan:
        # KV still lands in each position's own slot; only the rotary position moves.
        own = [slot_of(t, p, block_size) for t, p in zip(block_tables, plan.positions)]
        return StepPlan([p + 1 for p in plan.positions], plan.seq_lens, own)
