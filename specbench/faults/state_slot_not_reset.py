"""A hybrid target's prefill starts from whatever its state slot holds instead of zeros: a slot freed by a finished or
preempted request and handed to another leaks the old owner's state into the new one (the issue's "state slot
reused across requests after preemption"). Only runs where slots are reused (more requests than concurrency,
preemption) show it."""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class StateSlotNotReset(Mutant):
    fault = Fault("state-slot-not-reset", "a hybrid target's prefill starts from its reused slot's old state", "",
                  "target", Proposer, is_plain_hosted=True, caught_by="greedy, state oracle")

    def state_starts_fresh(self, is_first_position: list[bool]) -> list[bool]:
        return [False] * len(is_first_position)
