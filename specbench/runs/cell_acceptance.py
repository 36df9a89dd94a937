"""A cell's acceptance values as stored in cells.parquet, whatever their source (engine, response bodies, /metrics)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from specbench.metrics.specs import TREE_DEPTH_RATES, TREE_RANK_RATES
from specbench.runs.records import is_null


def cell_value(cell: Mapping[str, Any], column: str) -> float:
    """The cell's value of an acceptance column; per-position rates past the run's columns (a drafting server
    relabelled with its own k) are read from `server_accepted_per_pos`, tree depth and rank rates from their list
    columns. NaN when undefined."""
    value = cell.get(column)
    if not is_null(value):
        return float(value)
    for prefix, rates, first in (("tree_accept_rate_depth_", TREE_DEPTH_RATES, 1),
                                 ("tree_accept_rate_rank_", TREE_RANK_RATES, 0)):
        if column.startswith(prefix):  # a tree family's member: an entry of its list column
            values, index = cell.get(rates), int(column.removeprefix(prefix)) - first
            if values is None or index >= len(values) or is_null(values[index]):
                return math.nan
            return float(values[index])
    if column.startswith("accept_rate_pos_"):
        per_pos, rounds = cell.get("server_accepted_per_pos"), cell.get("num_draft_rounds")
        position = int(column.removeprefix("accept_rate_pos_"))
        if per_pos is not None and len(per_pos) >= position and not is_null(rounds) and rounds > 0:
            return float(per_pos[position - 1]) / float(rounds)
    return math.nan
