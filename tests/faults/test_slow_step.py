"""slow-step: registered like every fault, bends only the built engine it is installed on (its `step`), and makes
each step wait a fixed share of its own time (a fake clock: no timing in the test)."""

from __future__ import annotations

from specbench.faults import FAULTS, injection
from specbench.faults import slow_step
from specbench.faults.slow_step import SLOWDOWN, SlowStep


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 1e-3  # each reading moves time on, so a busy wait ends
        return self.now


class _Engine:
    def __init__(self, clock: _Clock) -> None:
        self.clock, self.steps = clock, 0

    def step(self) -> list:
        self.clock.now += 1.0  # a step of 1 s
        self.steps += 1
        return ["out"]


def test_slow_step_waits_its_share_of_each_step_and_touches_nothing_else(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(slow_step.time, "perf_counter", clock.perf_counter)
    fault = FAULTS["slow-step"]
    assert fault.layer == "speed" and fault.methods[0] == "none"  # k = 0 slowed too: an engine-wide slowdown
    hooks = injection("slow-step").new_hooks("none")
    assert isinstance(hooks, SlowStep) and not hooks.eager_drafting  # the production drafting path
    engine, clean = _Engine(clock), _Engine(clock)
    hooks.install(engine)
    start = clock.now
    assert engine.step() == ["out"] and engine.steps == 1
    assert 1 + SLOWDOWN <= clock.now - start < 1 + SLOWDOWN + 0.01  # the step, then a quarter of it
    start = clock.now
    clean.step()
    assert clock.now - start == 1.0  # another engine (and the class) stay clean
