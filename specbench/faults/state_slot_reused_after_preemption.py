"""A preempted request of a hybrid target resumes on the state slot it held before the preemption, although the
preemption gave that slot back and the cache may have handed it to another request meanwhile: two running requests
then read and write one slot, each step of one overwriting the other's state (a slot index kept on the request
after the pool took the slot back). Distinct from state-slot-not-reset, where each request owns its slot and only a
prefill inherits an old owner's state: here the resumed request's re-prefill starts from zeros as it should, and the
damage is the sharing that follows. Only runs that preempt while other requests wait for a slot show it."""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class StateSlotReusedAfterPreemption(Mutant):
    fault = Fault("state-slot-reused-after-preemption", "a preempted hybrid request resumes on its old state slot, "
                  "which another request may hold by then", "", "target", Proposer, is_plain_hosted=True,
                  caught_by="greedy, state oracle")

    def __init__(self) -> None:
        self._slot: dict[str, int] = {}  # request id -> the slot its last forward used
        self._stale: dict[str, int] = {}  # preempted request id -> the slot it held then (and keeps using)

    def preempting(self, request) -> None:
        slot = self._slot.get(request.request_id)
        if slot is not None:
            self._stale.setdefault(request.request_id, slot)

    def state_slots(self, request_ids: tuple[str, ...], slots: list[int]) -> list[int]:
        bent = [self._stale.get(i, slot) for i, slot in zip(request_ids, slots)]
        self._slot.update(zip(request_ids, bent))
        return bent
