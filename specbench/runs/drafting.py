"""Whether a cell drafted, and so whether it may stand as the k = 0 baseline (speedup, agreement): the one rule.

A cell drafted when any acceptance source saw draft rounds or draft tokens in its window (engine stats,
per-response fields or /metrics counter deltas). A server that speculates on its own (`sweep --backend openai`
without --method/-k) labels its cell k = 0 but drafts: it is no baseline, and comparing it with itself would
print a speedup and an agreement of exactly 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specbench.runs.records import is_null

UNKNOWN_METHOD = "unknown"  # a drafting server that does not say which method it runs


def _positive(value: Any) -> bool:
    return not is_null(value) and value > 0


def did_draft(cell: Mapping[str, Any]) -> bool:
    """`cell`: a cells.parquet row (or its acceptance columns). Draft tokens decide; rounds only where the source
    exports no token count (SGLang's verify rounds)."""
    tokens = cell.get("num_draft_tokens")
    return _positive(tokens) if not is_null(tokens) else _positive(cell.get("num_draft_rounds"))


def is_baseline_cell(cell: Mapping[str, Any]) -> bool:
    """num-steps 0 and no drafting seen: only such a cell is the reference of 'vs k=0' metrics."""
    return int(cell["num_steps"]) == 0 and not did_draft(cell)
