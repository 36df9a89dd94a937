"""Blaming a failed engine step on one request (serve/triage.py), and the engine loop's honesty about a dead engine."""

from __future__ import annotations

import threading
from collections import deque
from types import SimpleNamespace

from specbench.sampling_params import SamplingParams
from specbench.serve.triage import MAX_FAILED_STEPS_IN_ROW, Triage, Verdict


def test_a_failure_with_one_request_in_flight_is_that_request():
    assert Triage(8).on_failure({"a"}, set()) == Verdict(("a",), is_engine_suspect=False)


def test_suspects_are_readmitted_one_per_step_and_the_newest_is_blamed():
    triage = Triage(8)
    assert triage.on_failure({"a", "b", "c"}, {"c"}) == Verdict((), is_engine_suspect=False)  # three suspects
    assert triage.is_isolating and triage.concurrency_for_next_step(0) == 1
    triage.on_success({"a"}, set(), waiting={"b", "c"})  # a prefilled alone
    assert triage.concurrency_for_next_step(1) == 2
    triage.on_success({"b"}, set(), waiting={"c"})
    assert triage.on_failure({"a", "b"}, set()) == Verdict(("b",), is_engine_suspect=False)  # a decode with b added failed
    triage.on_success({"c"}, set(), waiting=set())
    assert triage.on_failure({"a", "c"}, {"c"}) == Verdict(("c",), is_engine_suspect=False)  # c's prefill failed
    triage.on_success(set(), {"a"}, waiting=set())  # a decoded (and finished) cleanly: every suspect cleared
    assert not triage.is_isolating and triage.concurrency_for_next_step(5) == 8


def test_isolation_ends_only_once_every_suspect_decoded():
    triage = Triage(8)
    triage.on_failure({"a", "b"}, set())
    triage.on_success(set(), set(), waiting={"a", "b"})  # no room to admit: still isolating
    assert triage.is_isolating
    triage.on_success({"a"}, set(), waiting={"b"})
    triage.on_success({"b"}, set(), waiting=set())
    assert triage.is_isolating  # b prefilled but has not decoded with a yet
    triage.on_success(set(), set(), waiting=set())
    assert not triage.is_isolating


def test_failures_in_a_row_make_the_engine_a_suspect_and_a_success_resets_them():
    triage = Triage(8)
    for _ in range(MAX_FAILED_STEPS_IN_ROW - 1):
        assert not triage.on_failure({"x"}, set()).is_engine_suspect
    triage.on_success(set(), set(), set())
    for _ in range(MAX_FAILED_STEPS_IN_ROW - 1):
        assert not triage.on_failure({"y"}, set()).is_engine_suspect
    assert triage.on_failure({"y"}, set()) == Verdict(("y",), is_engine_suspect=True)


class _FakeEngine:
    """Requests wait in a scheduler-like queue; a step admits one and raises when `fails` says so for a running
    request, else finishes every running request silently."""

    num_steps = 0
    on_emission = None

    def __init__(self, fails) -> None:
        self.fails = fails
        self.scheduler = SimpleNamespace(max_concurrency=4, running=[], waiting=deque(), prefix=None)
        self.added: list[str] = []

    def add_request(self, token_ids, params, *, request_id):
        self.added.append(request_id)
        self.scheduler.waiting.append(SimpleNamespace(request_id=request_id, params=params))

    def has_unfinished(self) -> bool:
        return bool(self.scheduler.waiting or self.scheduler.running)

    def step(self):
        if self.scheduler.waiting:
            self.scheduler.running.append(self.scheduler.waiting.popleft())
        if any(self.fails(r) for r in self.scheduler.running):
            raise RuntimeError("device lost")
        self.scheduler.running.clear()
        return []

    def recover_from_failed_step(self) -> None:
        self.scheduler.waiting.extendleft(reversed(self.scheduler.running))
        self.scheduler.running.clear()

    def abort_request(self, request_id: str) -> bool:
        for queue in (self.scheduler.waiting, self.scheduler.running):
            for request in list(queue):
                if request.request_id == request_id:
                    queue.remove(request)
                    return True
        return False


def _submit_and_wait(loop, params: SamplingParams) -> object:
    from specbench.serve.engine_loop import Admitted, Emitted

    events: list[object] = []
    done = threading.Event()

    def sink(event) -> None:
        events.append(event)
        if not isinstance(event, (Admitted, Emitted)):
            done.set()

    loop.submit((1, 2), params, sink)
    assert done.wait(10)
    return events[-1]


def test_an_engine_that_fails_every_step_is_reported_dead_once_the_canary_fails():
    from specbench.serve.engine_loop import EngineLoop, Failed

    engine = _FakeEngine(fails=lambda request: True)
    loop = EngineLoop(engine)
    loop.start()
    try:
        for _ in range(MAX_FAILED_STEPS_IN_ROW):  # each fails alone; the last makes the engine a suspect
            assert loop.is_healthy
            assert isinstance(_submit_and_wait(loop, SamplingParams()), Failed)
        loop._thread.join(10)  # the canary fails too: the loop stops
        assert not loop.is_healthy and "device lost" in loop.error
        assert engine.added[-1].startswith("srv-canary")
        assert isinstance(_submit_and_wait(loop, SamplingParams()), Failed)  # a dead loop answers at once
    finally:
        loop.stop()


def test_bad_requests_in_a_row_at_an_idle_server_do_not_get_it_reported_dead():
    from specbench.serve.engine_loop import EngineLoop, Failed

    engine = _FakeEngine(fails=lambda request: request.params.seed == 666)
    loop = EngineLoop(engine)
    loop.start()
    try:
        for _ in range(2 * MAX_FAILED_STEPS_IN_ROW + 1):
            assert isinstance(_submit_and_wait(loop, SamplingParams(seed=666)), Failed)
            assert loop.is_healthy
        assert any(request_id.startswith("srv-canary") for request_id in engine.added)  # the engine was checked
    finally:
        loop.stop()
