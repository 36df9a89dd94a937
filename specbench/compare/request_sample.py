"""One cell repeat's measured requests as arrays, so a cell metric can be recomputed for many resamples at once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

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
    num_prompt_tokens: np.ndarray  # [num_requests]
    num_output_tokens: np.ndarray  # [num_requests]
    num_emissions: np.ndarray  # [num_requests]
    busy_s: np.ndarray  # [num_requests] E2E, 0 when nothing was emitted: the request's share of the window
    ttft_s: np.ndarray  # [num_requests] NaN where undefined
    tpot_s: np.ndarray  # [num_requests] NaN where undefined
    e2e_s: np.ndarray  # [num_requests] NaN where undefined
    itl_s: np.ndarray  # [num_gaps] emission gaps of all requests
    itl_request: np.ndarray  # [num_gaps] index of the request each gap belongs to
    # Draft counts are NaN for HTTP rows (per-request counts unknown; acceptance then has no estimate).
    num_draft_rounds: np.ndarray  # [num_requests] D_i
    num_draft_tokens: np.ndarray  # [num_requests] T_d,i
    num_accepted_tokens: np.ndarray  # [num_requests] A_i
    num_accepted_per_pos: np.ndarray  # [num_requests, num_positions] rounds accepting draft position k + 1
    is_good: np.ndarray  # [num_requests] 1.0 when meeting every --goodput bound, 0.0 if not, NaN without --goodput

    @property
    def num_requests(self) -> int:
        return len(self.num_output_tokens)

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
        width = max((len(m.num_accepted_per_pos) for m in metrics), default=0)
        per_pos = np.zeros((len(metrics), width))
        for i, m in enumerate(metrics):
            per_pos[i, : len(m.num_accepted_per_pos)] = m.num_accepted_per_pos

        def column(name: str) -> np.ndarray:
            return np.array([_nan(getattr(m, name)) for m in metrics], dtype=np.float64)

        known = np.array([has_draft_stats(row) for row in rows], dtype=bool)

        def draft_column(name: str) -> np.ndarray:
            return np.where(known, column(name), np.nan)

        return cls(
            window_s=window,
            concurrency=int(rows[0]["concurrency"]) if rows else 1,
            release_s=release,
            num_prompt_tokens=column("num_prompt_tokens"),
            num_output_tokens=column("num_output_tokens"),
            num_emissions=column("num_emissions"),
            busy_s=np.nan_to_num(column("e2e_s")),
            ttft_s=column("ttft_s"),
            tpot_s=column("tpot_s"),
            e2e_s=column("e2e_s"),
            itl_s=np.array([gap for m in metrics for gap in m.itl_s], dtype=np.float64),
            itl_request=np.array([i for i, m in enumerate(metrics) for _ in m.itl_s], dtype=np.int64),
            num_draft_rounds=draft_column("num_draft_rounds"),
            num_draft_tokens=draft_column("num_draft_tokens"),
            num_accepted_tokens=draft_column("num_accepted_tokens"),
            num_accepted_per_pos=np.where(known[:, None], per_pos, np.nan),
            is_good=np.array([np.nan if _is_null(row.get("is_good")) else float(row["is_good"]) for row in rows],
                             dtype=np.float64),
        )
