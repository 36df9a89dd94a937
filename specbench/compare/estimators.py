"""Cell metrics as functions of a draw of its requests (draws.py): [num_resamples] values, one per replicate.

The identity draw reproduces the cell's own value (cells.parquet); a random draw gives bootstrap replicates.
Throughput = drawn tokens / the draw's replayed window. Latency statistics pool the drawn requests' values
(ITL: all gaps of each drawn request). Acceptance pools the drawn requests' draft rounds (each request a cluster
of its rounds), so a request weighs by its number of rounds, as the token-weighted cell metric does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from specbench.compare.draws import Draw
from specbench.compare.request_sample import RequestSample
from specbench.compare.weighted_quantile import weighted_quantile

Estimator = Callable[[RequestSample, Draw], np.ndarray]


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1.0), np.nan)


def _throughput(tokens: Callable[[RequestSample], np.ndarray]) -> Estimator:
    def estimate(sample: RequestSample, draw: Draw) -> np.ndarray:
        return _ratio(draw.counts @ tokens(sample), draw.window_s)

    return estimate


output_throughput = _throughput(lambda s: s.num_output_tokens)
total_throughput = _throughput(lambda s: s.num_prompt_tokens + s.num_output_tokens)
request_throughput = _throughput(lambda s: np.ones(s.num_requests))


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
        return _ratio(counts @ per_request_sum, counts @ per_request_num)
    return weighted_quantile(values, owner, counts, {"median": 0.5, "p99": 0.99}[stat])


def latency(field: str, stat: str) -> Estimator:
    return _pooled_itl(stat) if field == "itl_s" else _per_request(field, stat)


def tokens_per_emission(sample: RequestSample, draw: Draw) -> np.ndarray:
    return _ratio(draw.counts @ sample.num_output_tokens, draw.counts @ sample.num_emissions)


def acceptance_rate(sample: RequestSample, draw: Draw) -> np.ndarray:
    return _ratio(draw.counts @ sample.num_accepted_tokens, draw.counts @ sample.num_draft_tokens)


def acceptance_length(sample: RequestSample, draw: Draw) -> np.ndarray:
    """Token-weighted 1 + A / D (1.0 without draft rounds, as the cell tables report it; NaN when the
    per-request counts are unknown, as over HTTP)."""
    rounds = draw.counts @ sample.num_draft_rounds
    no_drafts = np.where(np.isnan(rounds), np.nan, 1.0)
    return np.where(rounds > 0, 1.0 + _ratio(draw.counts @ sample.num_accepted_tokens, rounds), no_drafts)


def accept_rate_at(position: int) -> Estimator:
    """p_k = A_k / D for 1-based draft position k."""

    def estimate(sample: RequestSample, draw: Draw) -> np.ndarray:
        if position > sample.num_accepted_per_pos.shape[1]:
            return np.full(draw.counts.shape[0], np.nan)
        accepted = draw.counts @ sample.num_accepted_per_pos[:, position - 1]
        return _ratio(accepted, draw.counts @ sample.num_draft_rounds)

    return estimate


def _good(sample: RequestSample, draw: Draw, weights: np.ndarray) -> np.ndarray:
    """counts @ (is_good x weights); NaN when the run has no --goodput (is_good null)."""
    if sample.num_requests == 0 or np.isnan(sample.is_good).any():
        return np.full(draw.counts.shape[0], np.nan)
    return draw.counts @ (sample.is_good * weights)


def request_goodput(sample: RequestSample, draw: Draw) -> np.ndarray:
    return _ratio(_good(sample, draw, np.ones(sample.num_requests)), draw.window_s)


def output_goodput(sample: RequestSample, draw: Draw) -> np.ndarray:
    return _ratio(_good(sample, draw, sample.num_output_tokens), draw.window_s)


def good_request_fraction(sample: RequestSample, draw: Draw) -> np.ndarray:
    return _ratio(_good(sample, draw, np.ones(sample.num_requests)), draw.counts.sum(axis=1))
