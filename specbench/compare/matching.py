"""Pair the cells of two runs on (workload, method, num-steps, temperature, concurrency, draft tree shape); list the
unmatched ones. Tables written before trees were swept have no shape columns: their cells are chains."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd

from specbench.errors import SpecbenchError

NO_BUDGET = 0  # draft_token_budget of chains and of trees without --num-draft-tokens (budgets are >= 1)


@dataclass(frozen=True, order=True)
class MatchKey:
    workload: str
    method: str
    num_steps: int
    temperature: float  # -1.0 stands for the workload's per-sample default (NaN in the tables)
    concurrency: int
    eagle_topk: int = 1  # 1: chains
    draft_token_budget: int = NO_BUDGET  # a tree's --num-draft-tokens; NO_BUDGET: every node the steps give

    @property
    def baseline(self) -> MatchKey:
        """The num-steps 0 cell that speedup and answer agreement compare against (a chain)."""
        return replace(self, num_steps=0, eagle_topk=1, draft_token_budget=NO_BUDGET)

    def __str__(self) -> str:
        """The key in bootstrap seeds (compare/bootstrap.rng_for): a chain's text is the one keys had before tree
        shapes joined them, so chain cells keep their intervals; a tree's adds its shape."""
        text = (f"MatchKey(workload={self.workload!r}, method={self.method!r}, num_steps={self.num_steps!r}, "
                f"temperature={self.temperature!r}, concurrency={self.concurrency!r}")
        if self.eagle_topk != 1:
            text += f", eagle_topk={self.eagle_topk!r}, draft_token_budget={self.draft_token_budget!r}"
        return text + ")"

    @property
    def shape_text(self) -> str:
        """'' for a chain, ' top-4' or ' top-4/16' for a tree (after k=... in titles)."""
        if self.eagle_topk == 1:
            return ""
        return f" top-{self.eagle_topk}" + (f"/{self.draft_token_budget}" if self.draft_token_budget else "")

    @property
    def point(self) -> tuple[int, int, int]:
        """What a best-k recommendation ranges over: (num_steps, eagle_topk, budget)."""
        return self.num_steps, self.eagle_topk, self.draft_token_budget

    @property
    def temperature_text(self) -> str:
        return format_temperature(self.temperature)

    def describe(self) -> str:
        return (
            f"{self.workload} {self.method} k={self.num_steps}{self.shape_text} temperature={self.temperature_text} "
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
        eagle_topk=_int_or(row.get("eagle_topk"), 1),
        draft_token_budget=_int_or(row.get("draft_token_budget"), NO_BUDGET),
    )


def _int_or(value, default: int) -> int:
    """A shape column's value; `default` where the table lacks it or it is null (chains, tables before trees)."""
    return default if value is None or (isinstance(value, float) and math.isnan(value)) else int(value)


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
            "the runs share no cell (matched on workload, method, num-steps, temperature, concurrency, tree shape): "
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
