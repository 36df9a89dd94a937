"""Seed 000 (sglang#24750): every draft step writes step 1's KV slot and sees step 1's visible length."""

from __future__ import annotations

from specbench.attention.metadata import slot_of
from specbench.faults.fault import Fault, Mutant
from specbench.runtime.hooks import StepPlan
from specbench.speculation.capabilities import HasDraftKV


class DraftKvSlice(Mutant):
    fault = Fault("draft-kv-slice", "draft step j > 1 writes step 1's slot and its visible length is not advanced by j",
                  "000 (sglang#24750)", "draft", HasDraftKV)

    def step_plan(self, step: int, plan: StepPlan, block_tables: list[tuple[int, ...]], block_size: int) -> StepPlan:
        if step <= 1:
            return plan
        back = step - 1
        first = [slot_of(t, p - back, block_size) for t, p in zip(block_tables, plan.positions)]
        return StepPlan(plan.positions, [s - back for s in plan.seq_lens], first)
