"""One cell of a sweep's grid: (repeat, temperature, concurrency, num_steps)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

DEFAULT_TEMPERATURE = "default"  # grid value meaning "the workload's own per-sample temperature"


@dataclass(frozen=True, slots=True)
class CellKey:
    repeat: int
    temperature: float | None  # None: the workload's per-sample default
    concurrency: int
    num_steps: int

    @property
    def cell_id(self) -> str:
        temp = DEFAULT_TEMPERATURE if self.temperature is None else format(self.temperature, "g")
        return f"r{self.repeat}-t{temp}-c{self.concurrency}-k{self.num_steps}"

    @property
    def baseline(self) -> CellKey:
        """The num-steps 0 cell that speedup and answer agreement compare against."""
        return dataclasses.replace(self, num_steps=0)

    @property
    def temperature_value(self) -> float:
        """For tables: NaN stands for the workload default."""
        return math.nan if self.temperature is None else self.temperature
