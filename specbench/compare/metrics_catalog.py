"""The metrics a comparison reports: the metric specs (metrics/specs.py: label, unit, direction, noise kind,
computation), selected by name or group."""

from __future__ import annotations

from collections.abc import Sequence

from specbench.errors import SpecbenchError
from specbench.metrics.metric_spec import Delta, MetricSpec, Resampling
from specbench.metrics.specs import (
    ACCURACY_METRICS,
    BASE_METRICS,
    GOODPUT_METRICS,
    GROUPS,
    NAMED_METRICS,
    OUTPUT_THROUGHPUT,
    SPEEDUP,
    catalog,
    position_metric,
)

Metric = MetricSpec  # compare's name for a metric spec

__all__ = ["ACCURACY_METRICS", "BASE_METRICS", "GOODPUT_METRICS", "GROUPS", "OUTPUT_THROUGHPUT", "SPEEDUP", "Delta",
           "Metric", "Resampling", "catalog", "position_metric", "select"]


_FAMILIES = ("accept_pos_", "tree_accept_depth_", "tree_accept_rank_")  # per position, tree depth, sibling rank


def select(names: Sequence[str] | None, num_positions: int, max_topk: int = 1) -> tuple[Metric, ...]:
    """Metrics by name or group (catalog order kept); None = all. `accept_pos` selects every position; the tree
    rows exist where some cell drafted trees (max_topk > 1)."""
    metrics = catalog(num_positions, max_topk)
    if not names:
        return metrics
    known = {m.name for m in metrics} | set(GROUPS) | {"accept_pos"} | {m.name for m in NAMED_METRICS}
    unknown = [n for n in names if n not in known and not n.startswith(_FAMILIES)]
    if unknown:
        supported = ", ".join([*GROUPS, *(m.name for m in NAMED_METRICS), "accept_pos", "accept_pos_<k>",
                               "tree_accept_depth_<d>", "tree_accept_rank_<r>"])
        raise SpecbenchError(f"unknown metric {', '.join(map(repr, unknown))}; supported: {supported}")
    wanted = set(names)
    return tuple(
        m for m in metrics
        if m.name in wanted or m.group in wanted or ("accept_pos" in wanted and m.name.startswith("accept_pos_"))
    )
