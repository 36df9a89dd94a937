"""How first turns arrive in a cell: all at once, at a fixed rate, or at a linearly ramped rate; bounded by the
sample count or by a duration (samples then cycle).

Linear ramp (vLLM `--ramp-up-strategy linear`): the rate used for the gap after arrival i is
start + (end - start) * progress, where progress = i / (n - 1) over n arrivals of a count-bounded cell, or
t_i / duration for a duration-bounded one (t_i = offset of arrival i). Gaps are gamma(shape=burstiness,
scale=1 / (rate * burstiness)) as for a fixed rate, so burstiness applies to ramps too.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from specbench.runs.sweep_config import SweepConfig


@dataclass(frozen=True, slots=True)
class LoadPattern:
    request_rate: float  # arrivals/s; inf = all at once (ignored under a ramp)
    burstiness: float  # gamma shape of arrival gaps
    duration_s: float | None  # arrivals stop after this many seconds; None: each sample once
    ramp_start_rps: float | None  # linear ramp from this rate ...
    ramp_end_rps: float | None  # ... to this one; both None without a ramp

    @classmethod
    def of(cls, config: SweepConfig) -> LoadPattern:
        return cls(config.request_rate, config.burstiness, config.duration,
                   config.ramp_up_start_rps if config.ramp_up_strategy else None,
                   config.ramp_up_end_rps if config.ramp_up_strategy else None)

    @property
    def is_ramp(self) -> bool:
        return self.ramp_start_rps is not None

    @property
    def is_scheduled(self) -> bool:
        """Arrivals follow a schedule (else every request is released as soon as a slot is free)."""
        return self.is_ramp or not math.isinf(self.request_rate)

    def offsets(self, num_requests: int | None, seed: int) -> Iterator[float]:
        """Arrival offsets (s after the cell's start) of the first turns; the first is 0. `num_requests`: the
        count of a count-bounded cell (None: unbounded, for a duration-bounded one: stop at `duration_s`)."""
        rng = np.random.default_rng(seed)
        t, i = 0.0, 0
        while num_requests is None or i < num_requests:
            if self.duration_s is not None and t >= self.duration_s:
                return
            yield t
            rate = self._rate(i, t, num_requests)
            if math.isinf(rate):
                gap = 0.0
            else:
                gap = float(rng.gamma(shape=self.burstiness, scale=1.0 / (rate * self.burstiness)))
            t += gap
            i += 1

    def _rate(self, index: int, t: float, num_requests: int | None) -> float:
        if not self.is_ramp:
            return self.request_rate
        if self.duration_s is not None:
            progress = min(t / self.duration_s, 1.0)
        else:
            progress = index / max((num_requests or 1) - 1, 1)
        return self.ramp_start_rps + (self.ramp_end_rps - self.ramp_start_rps) * progress
