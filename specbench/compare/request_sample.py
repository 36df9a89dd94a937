"""One cell repeat's measured requests as arrays, so a cell metric can be recomputed for many resamples at once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbench.metrics.pooled import RequestCounts
from specbench.metrics.request_metrics import RequestMetrics
from specbench.runs.records import has_draft_stats, stats_from_row
from specbench.runs.records import is_null as _is_null


def _nan(value: float | None) -> float:
    return np.nan if value is None else value


@dataclass(frozen=True)
class RequestSample:
    """Per-request values come from `RequestMetrics` (metrics/definitions.py); only the pooling is vectorised."""

    window_s: float  # measured window: last emission - first arrival
    concurrency: int  # the cell's cap on requests in flight
    release_s: np.ndarray  # [num_requests] earliest submission (scheduled arrival - first arrival; 0 = at once)
    counts: RequestCounts  # per-request counts the pooled metrics sum (metrics/pooled.py)
    busy_s: np.ndarray  # [num_requests] E2E, 0 when nothing was emitted: the request's share of the window
    ttft_s: np.ndarray  # [num_requests] NaN where undefined
    tpot_s: np.ndarray  # [num_requests] NaN where undefined
    e2e_s: np.ndarray  # [num_requests] NaN where undefined
    itl_s: np.ndarray  # [num_gaps] emission gaps of all requests
    itl_request: np.ndarray  # [num_gaps] index of the request each gap belongs to

    @property
    def num_requests(self) -> int:
        return self.counts.num_requests

    @classmethod
    def of(cls, requests: pd.DataFrame) -> RequestSample:
        """`requests`: one cell repeat's rows of requests.parquet (any order; kept in submission order)."""
        rows = requests.sort_values("request_index").to_dict("records")
        metrics = [RequestMetrics.from_stats(stats_from_row(row)) for row in rows]
        finishes = [m.finish_time for m in metrics if m.finish_time is not None]
        first_arrival = min((m.arrival_time for m in metrics), default=0.0)
        window = max(finishes) - first_arrival if finishes else 0.0
        scheduled = np.array([_nan(row["scheduled_time"]) for row in rows], dtype=np.float64)
        release = np.where(np.isnan(scheduled), 0.0, np.maximum(scheduled - first_arrival, 0.0))

        def column(name: str) -> np.ndarray:
            return np.array([_nan(getattr(m, name)) for m in metrics], dtype=np.float64)

        # Draft counts are NaN for HTTP rows without per-request counts (acceptance then has no estimate).
        known = np.array([has_draft_stats(row) for row in rows], dtype=bool)
        is_good = np.array([np.nan if _is_null(row.get("is_good")) else float(row["is_good"]) for row in rows],
                           dtype=np.float64)
        return cls(
            window_s=window,
            concurrency=int(rows[0]["concurrency"]) if rows else 1,
            release_s=release,
            counts=RequestCounts.of(metrics, is_draft_known=known, is_good=is_good),
            busy_s=np.nan_to_num(column("e2e_s")),
            ttft_s=column("ttft_s"),
            tpot_s=column("tpot_s"),
            e2e_s=column("e2e_s"),
            itl_s=np.array([gap for m in metrics for gap in m.itl_s], dtype=np.float64),
            itl_request=np.array([i for i, m in enumerate(metrics) for _ in m.itl_s], dtype=np.int64),
        )
