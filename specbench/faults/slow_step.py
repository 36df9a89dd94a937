"""Speed only: every engine step takes a fixed fraction longer (as a slower kernel, a lost fusion or a busier host
would make it), so throughput drops by 1 - 1 / (1 + SLOWDOWN) at any k, k = 0 included, and nothing else changes.
It is the regression two runs made at different times cannot tell from load (their k = 0 control moves alike),
and what `specbench ab`, which alternates the clean and the slow engine in one invocation, must call REGRESSED."""

from __future__ import annotations

import time
from collections.abc import Callable

from specbench.faults.fault import Fault, Mutant
from specbench.faults.path_mutant import wrap_method
from specbench.speculation.capabilities import Proposer

SLOWDOWN = 0.25  # each step waits a quarter of its own time: throughput x 1 / 1.25 = -20%


class SlowStep(Mutant):
    fault = Fault("slow-step", f"each engine step waits {SLOWDOWN:.0%} of its own time (throughput "
                  f"{1 / (1 + SLOWDOWN) - 1:+.0%}, speed only)", "", "speed", Proposer, is_plain_hosted=True)
    eager_drafting = False  # the production drafting path, so that only the step's time differs from a clean engine

    def install(self, engine) -> None:
        wrap_method(engine, "step", _slowed)


def _slowed(step: Callable) -> Callable:
    def slow(*args, **kwargs):
        start = time.perf_counter()
        out = step(*args, **kwargs)
        # Proportional: the same share on any machine. A busy wait, not sleep(): a step of a tiny model takes
        # about a millisecond, less than sleep()'s own overshoot, and a slower kernel keeps its core busy too.
        end = time.perf_counter() + SLOWDOWN * (time.perf_counter() - start)
        while time.perf_counter() < end:
            pass
        return out
    return slow
