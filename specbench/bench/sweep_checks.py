"""The checks every sweep runs on a cell's requests: the per-request acceptance histogram, degenerate loops and
the acceptance they inflate (metrics/loops.py), acceptance over time and its drift (bench/acceptance_drift.py).

Loop inflation: AL_all = 1 + A / D over the cell's requests, AL_clean the same without the looping ones;
`loop_acceptance_inflation` = AL_all / AL_clean - 1. `is_acceptance_loop_inflated` when some request loops and
either every request does or the inflation exceeds LOOP_INFLATION_TOLERANCE: the loops' share of the cell times
their excess acceptance moves the cell's value by more than that (a few loops in a big cell, or loops that
accept no more than the rest, do not).
"""

from __future__ import annotations

from collections.abc import Sequence

from specbench.bench.acceptance_drift import acceptance_windows, drift_test_columns
from specbench.metrics import definitions
from specbench.metrics.request_acceptance import QUANTILES, acceptance_histogram, acceptance_quantiles
from specbench.runs.records import Row, has_draft_stats, is_success, request_acceptance_length

LOOP_INFLATION_TOLERANCE = 0.05


def check_columns(request_rows: Sequence[Row], num_steps: int, duration_limit_s: float | None) -> Row:
    """cells.parquet's check columns from the cell's request rows (failed requests left out)."""
    ok = [r for r in request_rows if is_success(r)]
    lengths = [al for al in map(request_acceptance_length, ok) if al is not None]
    has_lengths = num_steps > 0 and bool(lengths)
    quantiles = acceptance_quantiles(lengths) if has_lengths else (None,) * len(QUANTILES)
    windows = acceptance_windows(ok)
    return {
        "acceptance_length_histogram": acceptance_histogram(lengths, num_steps) if has_lengths else None,
        **{f"acceptance_length_request_p{q}": value for q, value in zip(QUANTILES, quantiles, strict=True)},
        **_loop_columns(ok, num_steps),
        "acceptance_windows": windows or None,
        **drift_test_columns(windows, num_steps > 0 and duration_limit_s is not None),
    }


def _loop_columns(ok: Sequence[Row], num_steps: int) -> Row:
    flags = [r.get("is_degenerate_loop") for r in ok]
    known = [f for f in flags if f is not None]
    num_loops = sum(f is True for f in known)
    row: Row = {"num_loop_requests": num_loops if known else None,
                "loop_request_fraction": num_loops / len(known) if known else None,
                "acceptance_length_without_loops": None, "loop_acceptance_inflation": None,
                "is_acceptance_loop_inflated": None}
    with_counts = [r for r in ok if has_draft_stats(r) and r.get("is_degenerate_loop") is not None]
    if num_steps == 0 or not with_counts:
        return row
    clean = [r for r in with_counts if r["is_degenerate_loop"] is False]
    al_all, al_clean = _pooled_length(with_counts), _pooled_length(clean)
    row["acceptance_length_without_loops"] = al_clean
    if al_all is not None and al_clean is not None:
        row["loop_acceptance_inflation"] = al_all / al_clean - 1.0
    inflation = row["loop_acceptance_inflation"]
    row["is_acceptance_loop_inflated"] = num_loops > 0 and (
        not clean or (inflation is not None and inflation > LOOP_INFLATION_TOLERANCE))
    return row


def _pooled_length(rows: Sequence[Row]) -> float | None:
    rounds = sum(int(r["num_draft_rounds"]) for r in rows)
    return definitions.acceptance_length(sum(int(r["num_accepted_tokens"]) for r in rows), rounds) if rounds else None
