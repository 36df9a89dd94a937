"""A cell's rows for cells.parquet and categories.parquet: metrics, speedup, accuracy, agreement with k = 0."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from specbench.bench.server_acceptance import ENGINE_SOURCE, empty_acceptance
from specbench.bench.speedup_bound import bound_columns
from specbench.bench.sweep_checks import check_columns
from specbench.metrics.accuracy import accuracy, answer_agreement
from specbench.metrics.cell_metrics import CellMetrics, speedup
from specbench.metrics.goodput import Goodput
from specbench.runs.anomalies import kind_label, summarize
from specbench.runs.records import Row, cell_metrics_from_rows, has_draft_stats, is_success, score_from_row
from specbench.runs.schema import columns


def cell_row(
    keys: Mapping[str, Any],
    extra: Mapping[str, Any],
    metrics: CellMetrics,
    request_rows: Sequence[Row],
    baseline_id: str | None,
    baseline_rows: Sequence[Row] | None,
    num_positions: int,
    *,
    backend: str = "embedded",
    window_anomalies: Sequence[str] = (),
    steps: Sequence[Row] = (),
) -> Row:
    """`extra`: load-pattern and timing columns (run_index: null if absent); `baseline_rows`: request rows of the
    k = 0 cell, if run; `window_anomalies`: "kind: detail" of the server counters' checks over the window (HTTP);
    `steps`: the cell's step rows (a tighter speedup bound, bench/speedup_bound.py).

    `metrics` covers the successful requests. Over HTTP the caller replaces the acceptance columns with the
    server's (server_acceptance.py); here they say "engine".
    """
    ok_rows = [r for r in request_rows if is_success(r)]
    row: Row = {**keys, **extra, **metrics.to_row(num_positions)}
    row.update(goodput_columns(request_rows, metrics.duration_s, extra.get("goodput_slo")))
    preemptions = [r["num_preemptions"] for r in ok_rows if r["num_preemptions"] is not None]
    row["num_preemptions"] = sum(preemptions) if preemptions or not ok_rows else None
    row["num_rounds_by_drafted_length"] = rounds_by_drafted_length(ok_rows, keys["num_steps"])
    row.update(
        backend=backend,
        acceptance_source=ENGINE_SOURCE,
        acceptance_note=None,
        server_generation_tokens=None,
        server_accepted_per_pos=None,
        drafting_note=None,
        **failure_columns(request_rows),
        **anomaly_columns(request_rows, window_anomalies),
    )
    row["baseline_cell_id"] = baseline_id if baseline_rows is not None else None
    row["speedup"] = speedup(metrics, cell_metrics_from_rows(baseline_rows)) if baseline_rows else None
    row.setdefault("run_index", None)
    row.update(bound_columns(row, steps))
    # The sweep fills these once the end probe of the cell's group ran (bench/drift.py).
    row.update(baseline_drift=None, is_drift_suspect=None)
    row.update(check_columns(request_rows, keys["num_steps"], extra.get("duration_limit_s")))
    # cell_tables fills these from the backend's window (backends/prefix_cache.py).
    row.update(prefix_cache_hit_rate=None, prefix_cache_source=None, prefix_cache_note=None)
    # cell_tables fills these from the complete row (metrics/recompute.py).
    row.update(is_metrics_consistent=None, metrics_mismatch=None)

    scores = [s for s in map(score_from_row, ok_rows) if s is not None]
    acc = accuracy(scores)
    row.update(
        accuracy_n=acc.n,
        accuracy_strict=acc.strict,
        accuracy_strict_stderr=acc.strict_stderr,
        accuracy_flexible=acc.flexible,
        accuracy_flexible_stderr=acc.flexible_stderr,
    )
    row.update(_agreement(ok_rows, [r for r in baseline_rows or () if is_success(r)]))
    return row


def goodput_columns(request_rows: Sequence[Row], duration_s: float, slo_text: str | None) -> Row:
    """From the requests' `is_good` flags (metrics/goodput.py); all null without --goodput."""
    if slo_text is None:
        return {"goodput_slo": None, "num_good_requests": None, "good_request_fraction": None,
                "request_goodput": None, "output_goodput": None}
    good = Goodput.of([r["num_output_tokens"] for r in request_rows if r["is_good"] is True], len(request_rows),
                      duration_s)
    return {"goodput_slo": slo_text, **dataclasses.asdict(good)}


def failure_columns(request_rows: Sequence[Row]) -> Row:
    """num_errors, error_summary ('2 x http 500; 1 x timeout': kinds are the text before ':') and how the
    successful requests' tokens were counted."""
    kinds = Counter(str(r["error"]).split(":", 1)[0] for r in request_rows if not is_success(r))
    sources = {r.get("token_count_source") for r in request_rows if is_success(r)} - {None}
    draft_sources = {r.get("draft_stats_source") for r in request_rows if is_success(r)} - {None}
    return {
        "draft_stats_source": _one_or_mixed(draft_sources),
        "num_errors": sum(kinds.values()),
        "error_summary": "; ".join(f"{n} x {kind}" for kind, n in kinds.most_common()) or None,
        "token_count_source": _one_or_mixed(sources),
    }


def anomaly_columns(request_rows: Sequence[Row], window_anomalies: Sequence[str]) -> Row:
    """num_anomalies and anomaly_summary over every request (failed ones too) and the window's counter checks."""
    stored = [r.get("anomalies") for r in request_rows]  # lists, or numpy arrays read back from parquet
    labels = [kind_label(a) for found in stored if found is not None for a in found]
    labels += map(kind_label, window_anomalies)
    return {"num_anomalies": len(labels), "anomaly_summary": summarize(labels),
            "window_anomalies": list(window_anomalies)}


def _one_or_mixed(values: set[str]) -> str | None:
    return (next(iter(values)) if len(values) == 1 else "mixed") if values else None


def _agreement(rows: Sequence[Row], baseline_rows: Sequence[Row]) -> Row:
    """Requests pair by (sample_id, turn); a turn missing on one side is left out."""
    baseline = {(r["sample_id"], r["turn"]): r for r in baseline_rows}
    pairs = [(r, baseline[(r["sample_id"], r["turn"])]) for r in rows if (r["sample_id"], r["turn"]) in baseline]
    agreement = answer_agreement(
        [score_from_row(r) for r, _ in pairs],
        [score_from_row(b) for _, b in pairs],
        [r["output_text"] or "" for r, _ in pairs],
        [b["output_text"] or "" for _, b in pairs],
    )
    return {
        "agreement_num_pairs": agreement.num_pairs,
        "agreement_strict": agreement.strict,
        "agreement_flexible": agreement.flexible,
        "agreement_text": agreement.text,
    }


def category_rows(keys: Mapping[str, Any], request_rows: Sequence[Row], num_positions: int) -> list[Row]:
    """One row per sample category, in first-seen order (no throughput: categories share the cell's window)."""
    by_category: dict[str, list[Row]] = {}
    for row in request_rows:
        by_category.setdefault(row["category"], []).append(row)
    names = [name for name, _, _ in columns("categories", num_positions)]
    out = []
    for category, rows in by_category.items():
        merged = {**keys, "category": category, **cell_metrics_from_rows(rows).to_row(num_positions)}
        if not all(has_draft_stats(r) for r in rows):  # HTTP: server counters are per cell, not per category
            merged.update(empty_acceptance(num_positions))
        out.append({name: merged[name] for name in names})
    return out


def rounds_by_drafted_length(ok_rows: Sequence[Row], num_steps: int) -> list[int] | None:
    """[num_steps] rounds that drafted exactly L = 1..k tokens, summed over requests. A round proposing position L
    proposed every position before it, so rounds of length exactly L are D_L - D_(L+1) (D: num_drafted_per_pos).
    None where no request has per-position counts (HTTP) or k = 0."""
    drafted = [list(r["num_drafted_per_pos"]) for r in ok_rows if r.get("num_drafted_per_pos") is not None]
    if not num_steps or not drafted:
        return None
    totals = [sum(d[i] if i < len(d) else 0 for d in drafted) for i in range(num_steps)] + [0]
    return [totals[i] - totals[i + 1] for i in range(num_steps)]
