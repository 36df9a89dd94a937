"""Terminal summary of a sweep: metric rows x cell columns per temperature (means over repeats), plus categories."""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable, Sequence
from typing import Any

from specbench.metrics.accuracy import format_accuracy
from specbench.metrics.metric_spec import Resampling, SummaryRow
from specbench.metrics.specs import (
    ACCEPTANCE_LENGTH,
    ACCEPTANCE_RATE,
    SUMMARY_ACCURACY_ROWS,
    SUMMARY_GOODPUT_ROWS,
    SUMMARY_ROWS,
    SUMMARY_TREE_ROWS,
    depth_metric,
    over_repeats,
    position_metric,
    rank_metric,
)
from specbench.runs.cell_acceptance import cell_value
from specbench.runs.cell_key import shape_text
from specbench.runs.records import Row
from specbench.runs.speedup_flags import speedup_mark

Cell = Callable[[Sequence[Row]], str]  # formats one grid point from its rows (one per repeat)


def _mean(rows: Sequence[Row], column: str) -> float | None:
    values = [r[column] for r in rows if r.get(column) is not None and not _isnan(r[column])]
    return sum(values) / len(values) if values else None


def _isnan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _num(column: str, scale: float = 1.0, digits: int = 2) -> Cell:
    def fmt(rows: Sequence[Row]) -> str:
        value = _mean(rows, column)
        return "-" if value is None else f"{value * scale:.{digits}f}"

    return fmt


def _per_index(family: str) -> Cell:
    """One rate per index of a metric family: draft positions 1..k, tree depths 1..k, sibling ranks 0..topk - 1."""
    metric_of = {"position": position_metric, "depth": depth_metric, "rank": rank_metric}[family]

    def fmt(rows: Sequence[Row]) -> str:
        if family == "rank":
            indices = range(max(int(r.get("eagle_topk") or 1) for r in rows))
        else:
            indices = range(1, max(r["num_steps"] for r in rows) + 1)
        # cell_value: a drafting server relabelled with its own k has its rates past the run's columns
        values = [[v for r in rows if not math.isnan(v := cell_value(r, metric_of(i).column))] for i in indices]
        if not values or (family != "position" and not any(values)):  # a chain cell has no tree values: N/A
            return "-"
        return " ".join(f"{100 * sum(v) / len(v):.0f}" if v else "-" for v in values)

    return fmt


def _speedup(column: str, digits: int) -> Cell:
    """The geometric mean over repeats, marked where flagged (runs/speedup_flags.py): such a speedup is shown, not
    vouched for."""

    def fmt(rows: Sequence[Row]) -> str:
        value = over_repeats([r.get(column) for r in rows])  # the one definition (metrics/specs.py)
        return "-" if value is None else f"{value:.{digits}f}" + speedup_mark(rows)

    return fmt


def _accuracy(column: str, digits: int) -> Cell:
    def fmt(rows: Sequence[Row]) -> str:
        # repeats re-ask the same prompts: the interval is over one repeat's prompts, not their pooled count
        value, n = _mean(rows, column), _mean(rows, "accuracy_n")
        if value is None:
            return "-"
        return format_accuracy(value, None if n is None else round(n), digits)

    return fmt


def _cell(row: SummaryRow) -> Cell:
    """Speedup carries its flag mark, accuracy its 95% interval, the per-position row one rate per draft position."""
    metric = row.metric
    if metric is None:
        return _per_index(row.family)
    if metric.resampling is Resampling.SPEEDUP:
        return _speedup(metric.column, row.num_digits)
    if metric.group == "accuracy":
        return _accuracy(metric.column, row.num_digits)
    return _num(metric.column, row.scale, row.num_digits)


def _rows(rows: Sequence[SummaryRow]) -> tuple[tuple[str, Cell], ...]:
    return tuple((row.text, _cell(row)) for row in rows)


METRICS = _rows(SUMMARY_ROWS)
GOODPUT = _rows(SUMMARY_GOODPUT_ROWS)
ANOMALIES: tuple[tuple[str, Cell], ...] = (("Server anomalies", _num("num_anomalies", digits=0)),)
ACCURACY = _rows(SUMMARY_ACCURACY_ROWS)
TREES = _rows(SUMMARY_TREE_ROWS)


def format_summary(cells: Sequence[Row], width: int | None = None) -> str:
    """One block per temperature; columns are (concurrency, k, tree shape) grid points, averaged over repeats."""
    width = width or shutil.get_terminal_size((120, 24)).columns
    has_accuracy = any(r["accuracy_n"] for r in cells)
    has_goodput = any(r.get("goodput_slo") is not None for r in cells)
    has_anomalies = any(r.get("num_anomalies") for r in cells)
    has_trees = any(int(r.get("eagle_topk") or 1) > 1 for r in cells)
    metrics = (METRICS + (TREES if has_trees else ()) + (GOODPUT if has_goodput else ())
               + (ACCURACY if has_accuracy else ()) + (ANOMALIES if has_anomalies else ()))
    blocks = []
    for temperature, rows in _group(cells, lambda r: _temperature_label(r["temperature"])).items():
        points = _group(rows, lambda r: (r["concurrency"], r["num_steps"], shape_text(r)))
        headers = [f"c={c} k={k}{shape}" for c, k, shape in points]
        body = [[label] + [fmt(point_rows) for point_rows in points.values()] for label, fmt in metrics]
        repeats = max(len(v) for v in points.values())
        title = f"temperature {temperature}" + (f" (mean of {repeats} repeats)" if repeats > 1 else "")
        blocks.append(_render(title, "Metric", headers, body, width))
    return "\n\n".join(blocks)


def format_categories(categories: Sequence[Row], width: int | None = None) -> str:
    """Acceptance length and rate per category for the speculative cells (k > 0)."""
    width = width or shutil.get_terminal_size((120, 24)).columns
    rows = [r for r in categories if r["num_steps"] > 0]
    if not rows:
        return ""
    points = _group(rows, lambda r: (_temperature_label(r["temperature"]), r["concurrency"], r["num_steps"],
                                     shape_text(r)))
    headers = [f"t={t} c={c} k={k}{shape}" for t, c, k, shape in points]
    names = list(dict.fromkeys(r["category"] for r in rows))
    body = []
    for name in names:
        line = [name]
        for point_rows in points.values():
            subset = [r for r in point_rows if r["category"] == name]
            al, rate = _mean(subset, ACCEPTANCE_LENGTH.column), _mean(subset, ACCEPTANCE_RATE.column)
            line.append("-" if al is None else f"{al:.2f} / {100 * rate:.0f}%" if rate is not None else f"{al:.2f}")
        body.append(line)
    return _render("acceptance length / rate per category", "Category", headers, body, width)


def _temperature_label(value: float) -> str:
    return "workload default" if _isnan(value) else format(value, "g")


def _group(rows: Sequence[Row], key) -> dict[Any, list[Row]]:
    groups: dict[Any, list[Row]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)
    return groups


def _render(title: str, corner: str, headers: list[str], body: list[list[str]], width: int) -> str:
    """Columns that do not fit `width` continue in a further table below."""
    label_width = max(len(corner), *(len(line[0]) for line in body))
    widths = [max(len(h), *(len(line[i + 1]) for line in body)) for i, h in enumerate(headers)]
    chunks, current, used = [], [], label_width
    for i, w in enumerate(widths):
        if current and used + 2 + w > width:
            chunks.append(current)
            current, used = [], label_width
        current.append(i)
        used += 2 + w
    chunks.append(current)
    out = [title]
    for chunk in chunks:
        out.append(corner.ljust(label_width) + "".join("  " + headers[i].rjust(widths[i]) for i in chunk))
        out.append("-" * (label_width + sum(2 + widths[i] for i in chunk)))
        for line in body:
            out.append(line[0].ljust(label_width) + "".join("  " + line[i + 1].rjust(widths[i]) for i in chunk))
    return "\n".join(out)
