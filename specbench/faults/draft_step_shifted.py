"""Draft step j's whole plan one position late: query at position + 1, one more visible key, that position's slot.

Self-consistent (INV-0 and INV-SLOT hold on the metadata alone), but not what the request's committed length says.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.runtime.hooks import StepPlan
from specbench.speculation.capabilities import HasDraftKV


class DraftStepShifted(Mutant):
    fault = Fault("draft-step-shifted", "draft step j's query, visible length and slot all one position late "
                  "(self-consistent)", "", "draft", HasDraftKV)

    def step_plan(self, step: int, plan: StepPlan, block_tables: list[tuple[int, ...]], block_size: int) -> StepPlan:
        positions = [p + 1 for p in plan.positions]
        return StepPlan(positions, [p + 1 for p in positions], None)
