"""Pair the cells of two runs on (workload, method, num-steps, temperature, concurrency); list the unmatched ones."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd

from specbench.errors import SpecbenchError


@dataclass(frozen=True, order=True)
class MatchKey:
    workload: str
    method: str
    num_steps: int
    temperature: float  # -1.0 stands for the workload's per-sample default (NaN in the tables)
    concurrency: int

    @property
    def baseline(self) -> MatchKey:
        """The num-steps 0 cell that speedup and answer agreement compare against."""
        return replace(self, num_steps=0)

    @property
    def temperature_text(self) -> str:
        return format_temperature(self.temperature)

    def describe(self) -> str:
        return (
            f"{self.workload} {self.method} k={self.num_steps} temperature={self.temperature_text} "
            f"c={self.concurrency}"
        )


DEFAULT_TEMPERATURE = -1.0


def format_temperature(temperature: float) -> str:
    return "default" if temperature == DEFAULT_TEMPERATURE else format(temperature, "g")


def key_of(row: pd.Series) -> MatchKey:
    temperature = float(row["temperature"])
    return MatchKey(
        workload=str(row["workload"]),
        method=str(row["method"]),
        num_steps=int(row["num_steps"]),
        temperature=DEFAULT_TEMPERATURE if math.isnan(temperature) else temperature,
        concurrency=int(row["concurrency"]),
    )


def cell_ids_by_key(cells: pd.DataFrame) -> dict[MatchKey, dict[int, str]]:
    """key -> {repeat: cell_id}."""
    out: dict[MatchKey, dict[int, str]] = {}
    for _, row in cells.iterrows():
        out.setdefault(key_of(row), {})[int(row["repeat"])] = str(row["cell_id"])
    return out


@dataclass(frozen=True)
class Matching:
    matched: tuple[MatchKey, ...]  # sorted
    only_before: tuple[MatchKey, ...]
    only_after: tuple[MatchKey, ...]

    @property
    def all_keys(self) -> tuple[MatchKey, ...]:
        return tuple(sorted(self.matched + self.only_before + self.only_after))


def match_cells(before: pd.DataFrame, after: pd.DataFrame) -> Matching:
    """Raises when no cell matches, naming what each run holds."""
    keys_before, keys_after = set(cell_ids_by_key(before)), set(cell_ids_by_key(after))
    matched = tuple(sorted(keys_before & keys_after))
    if not matched:
        raise SpecbenchError(
            "the runs share no cell (matched on workload, method, num-steps, temperature, concurrency): "
            f"before has {_summary(keys_before)}; after has {_summary(keys_after)}"
        )
    return Matching(matched, tuple(sorted(keys_before - keys_after)), tuple(sorted(keys_after - keys_before)))


def _summary(keys: set[MatchKey]) -> str:
    def values(name: str) -> str:
        found = sorted({getattr(k, name) for k in keys})
        return ",".join(format_temperature(v) if name == "temperature" else str(v) for v in found)

    return (
        f"workload {values('workload')} method {values('method')} k={values('num_steps')} "
        f"temperature={values('temperature')} c={values('concurrency')}"
    )
