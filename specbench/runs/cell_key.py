"""One cell of a sweep's grid: (repeat, temperature, concurrency, num_steps, draft tree shape)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specbench.speculation.draft_shape import DraftShape

DEFAULT_TEMPERATURE = "default"  # grid value meaning "the workload's own per-sample temperature"


@dataclass(frozen=True, slots=True)
class CellKey:
    repeat: int
    temperature: float | None  # None: the workload's per-sample default
    concurrency: int
    num_steps: int
    # The draft tree's shape (speculation/draft_shape.py): eagle_topk 1 = chains, which take no budget. Named
    # draft_token_budget in the tables, whose num_draft_tokens counts the tokens drafted.
    eagle_topk: int = 1
    draft_token_budget: int | None = None

    def __post_init__(self) -> None:
        if self.eagle_topk == 1 and self.draft_token_budget is not None:
            raise ValueError("a chain (eagle_topk 1) takes no draft_token_budget")
        if self.num_steps == 0 and self.eagle_topk != 1:
            raise ValueError("num_steps 0 drafts nothing: its shape is the chain")

    @property
    def cell_id(self) -> str:
        """Chains keep the id they had before trees were swept (runs written then resume as they were)."""
        temp = DEFAULT_TEMPERATURE if self.temperature is None else format(self.temperature, "g")
        return f"r{self.repeat}-t{temp}-c{self.concurrency}-k{self.num_steps}{shape_suffix(self.draft_shape)}"

    @property
    def draft_shape(self) -> DraftShape:
        return DraftShape(self.eagle_topk, self.draft_token_budget)

    @property
    def baseline(self) -> CellKey:
        """The num-steps 0 cell that speedup and answer agreement compare against."""
        return dataclasses.replace(self, num_steps=0, eagle_topk=1, draft_token_budget=None)

    @property
    def temperature_value(self) -> float:
        """For tables: NaN stands for the workload default."""
        return math.nan if self.temperature is None else self.temperature


def shape_suffix(shape: DraftShape) -> str:
    """'' for a chain, '-top4' or '-top4-n16' for a tree (cell ids, server log names)."""
    if not shape.is_tree:
        return ""
    return f"-top{shape.eagle_topk}" + ("" if shape.num_draft_tokens is None else f"-n{shape.num_draft_tokens}")


def shape_text(row: Mapping[str, Any]) -> str:
    """A table row's shape for titles and headers: '' for a chain (rows written before trees too), ' top-4' or
    ' top-4/16' for a tree."""
    topk, budget = row.get("eagle_topk"), row.get("draft_token_budget")
    if _is_missing(topk) or int(topk) == 1:
        return ""
    return f" top-{int(topk)}" + ("" if _is_missing(budget) else f"/{int(budget)}")


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def launch_group(key: CellKey) -> tuple[int, int, int]:
    """What one launched server serves: (num_steps, eagle_topk, budget; 0 for none)."""
    return key.num_steps, key.eagle_topk, key.draft_token_budget or 0
