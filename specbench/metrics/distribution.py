"""Summary statistics of a latency sample: mean, median, p90, p99 (numpy linear), population std."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Distribution:
    count: int
    mean: float | None  # None for an empty sample
    median: float | None
    p90: float | None
    p99: float | None
    std: float | None  # ddof=0, as vLLM reports it

    @classmethod
    def of(cls, values: Iterable[float | None]) -> Distribution:
        """Summary over the defined (non-None) values."""
        data = np.asarray([v for v in values if v is not None], dtype=np.float64)
        if data.size == 0:
            return cls(0, None, None, None, None, None)
        median, p90, p99 = np.percentile(data, [50, 90, 99])
        return cls(int(data.size), float(data.mean()), float(median), float(p90), float(p99), float(data.std()))

    def to_row(self, prefix: str) -> dict[str, float | int | None]:
        return {
            f"{prefix}_count": self.count,
            f"{prefix}_mean": self.mean,
            f"{prefix}_median": self.median,
            f"{prefix}_p90": self.p90,
            f"{prefix}_p99": self.p99,
            f"{prefix}_std": self.std,
        }
