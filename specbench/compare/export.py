"""Machine-readable comparisons: one record per (cell, metric) as CSV or JSON (with the runs and settings)."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import asdict
from typing import Any

import pandas as pd

from specbench.compare.comparison import Comparison, MetricDelta


def _number(value: float | None) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def record(row: MetricDelta) -> dict[str, Any]:
    key, metric = row.key, row.metric
    return {
        "workload": key.workload,
        "method": key.method,
        "num_steps": key.num_steps,
        "eagle_topk": key.eagle_topk,
        "draft_token_budget": key.draft_token_budget or None,
        "temperature": key.temperature_text,
        "concurrency": key.concurrency,
        "metric": metric.name,
        "label": metric.label,
        "unit": metric.unit,
        "scale": metric.scale,
        "higher_is_better": metric.higher_is_better,
        "resampling": metric.resampling.value,
        "delta_kind": metric.delta.value,
        "before": _number(row.before),
        "after": _number(row.after),
        "delta": _number(row.delta),
        "ci_low": _number(row.interval.low) if row.interval else None,
        "ci_high": _number(row.interval.high) if row.interval else None,
        "p_value": _number(row.p_value),
        "verdict": row.verdict.value,
        "noise_basis": row.basis.value,
        "mde": _number(row.mde),
        "run_spread": _number(row.run_spread),
        "ci_bootstrap_low": _number(row.bootstrap_interval.low) if row.bootstrap_interval else None,
        "ci_bootstrap_high": _number(row.bootstrap_interval.high) if row.bootstrap_interval else None,
        "num_before": row.num_before,
        "num_after": row.num_after,
        "num_runs_before": row.num_runs_before,
        "num_runs_after": row.num_runs_after,
        "control_delta": _number(row.control_delta),
        "probe_sd": _number(row.probe_sd),
    }


def comparison_frame(comparison: Comparison) -> pd.DataFrame:
    """One row per (cell, metric): what --format csv writes."""
    return pd.DataFrame([record(row) for row in comparison.rows])


def render_csv(comparison: Comparison) -> str:
    """Values in stored units (seconds, fractions); `scale` turns them into the table's units."""
    out = io.StringIO()
    records = [record(row) for row in comparison.rows]
    writer = csv.DictWriter(out, fieldnames=list(records[0]) if records else ["metric"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)
    return out.getvalue()


def render_json(comparison: Comparison) -> str:
    m = comparison.matching
    doc = {
        "before": asdict(comparison.before),
        "after": asdict(comparison.after),
        "differences": [asdict(d) for d in comparison.differences],
        "options": asdict(comparison.options),
        "unmatched": {"only_before": [k.describe() for k in m.only_before],
                      "only_after": [k.describe() for k in m.only_after]},
        "correctness": [{"cell": d.key.describe(), "same_text_before": d.before, "same_text_after": d.after,
                         "is_regression": d.is_regression} for d in comparison.divergences],
        "drift": asdict(comparison.drift),
        "rows": [record(row) for row in comparison.rows],
    }
    return json.dumps(doc, indent=2) + "\n"
