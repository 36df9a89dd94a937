"""Cell metrics as functions of a draw of its requests (draws.py): [num_resamples] values, one per replicate.

The identity draw reproduces the cell's own value (cells.parquet); a random draw gives bootstrap replicates.
Pooled metrics (throughput, tokens per emission, acceptance, goodput) evaluate the metric spec's own computation
(metrics/specs.py) on the draw's pooled counts: throughput = drawn tokens / the draw's replayed window; acceptance
pools the drawn requests' draft rounds (each request a cluster of its rounds), so a request weighs by its number
of rounds, as the token-weighted cell metric does. Latency statistics pool the drawn requests' values (ITL: all
gaps of each drawn request).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from specbench.compare.draws import Draw
from specbench.compare.request_sample import RequestSample
from specbench.compare.weighted_quantile import weighted_quantile
from specbench.metrics.metric_spec import MetricSpec
from specbench.metrics.pooled import Pooled, ratio

Estimator = Callable[[RequestSample, Draw], np.ndarray]


def _pooled(computation: Callable[[Pooled], np.ndarray]) -> Estimator:
    def estimate(sample: RequestSample, draw: Draw) -> np.ndarray:
        return computation(Pooled(sample.counts, draw.counts, draw.window_s))

    return estimate


def _per_request(field: str, stat: str) -> Estimator:
    """mean / median / p99 over the requests with a defined value (repeated as often as resampled)."""

    def estimate(sample: RequestSample, draw: Draw) -> np.ndarray:
        values = getattr(sample, field)
        defined = np.flatnonzero(~np.isnan(values))
        return _summarise(values[defined], defined, draw.counts, stat)

    return estimate


def _pooled_itl(stat: str) -> Estimator:
    """Emission gaps pooled over requests: a resampled request brings all its gaps."""

    def estimate(sample: RequestSample, draw: Draw) -> np.ndarray:
        return _summarise(sample.itl_s, sample.itl_request, draw.counts, stat)

    return estimate


def _summarise(values: np.ndarray, owner: np.ndarray, counts: np.ndarray, stat: str) -> np.ndarray:
    """values: [num_values], owner: [num_values] their requests; counts: [num_resamples, num_requests]."""
    if stat == "mean":
        per_request_sum = np.bincount(owner, weights=values, minlength=counts.shape[1])
        per_request_num = np.bincount(owner, minlength=counts.shape[1]).astype(float)
        return ratio(counts @ per_request_sum, counts @ per_request_num)
    return weighted_quantile(values, owner, counts, {"median": 0.5, "p99": 0.99}[stat])


def latency(field: str, stat: str) -> Estimator:
    return _pooled_itl(stat) if field == "itl_s" else _per_request(field, stat)


def estimator_of(metric: MetricSpec) -> Estimator:
    """REQUESTS and ROUNDS metrics: the spec's pooled computation, or its per-request statistic."""
    if metric.pooled is not None:
        return _pooled(metric.pooled)
    if metric.per_request is not None and metric.stat is not None:
        return latency(metric.per_request, metric.stat)
    raise ValueError(f"{metric.name} ({metric.resampling.value}) has no per-draw estimator")
