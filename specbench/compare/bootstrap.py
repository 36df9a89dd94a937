"""Bootstrap replicates of a cell's metrics: requests resampled within each repeat, then repeats resampled.

A cell's value is the mean over its repeats of the per-repeat metric. Replicate b: draw R repeats with
replacement (R = number of repeats; skipped when R = 1), and for each drawn repeat one of its request-level
replicates (draws.py; all metrics of a repeat share the same draw). Seeds derive
from (seed, run side, cell, repeat), so a result does not depend on which other metrics or cells were asked for.
"""

from __future__ import annotations

import warnings
import zlib
from dataclasses import dataclass

import numpy as np

from specbench.compare.draws import Draw, identity_draw
from specbench.compare.request_sample import RequestSample

MIN_REQUESTS = 5  # fewer requests per repeat (and fewer than MIN_REPEATS repeats): no interval
MIN_REPEATS = 3


def rng_for(seed: int, *parts: object) -> np.random.Generator:
    """A generator fixed by `seed` and the given identifiers (order-independent of the rest of the comparison)."""
    return np.random.default_rng([seed, zlib.crc32("|".join(map(str, parts)).encode())])


@dataclass(frozen=True)
class RepeatReplicates:
    point: float  # the repeat's own value (NaN when undefined)
    replicates: np.ndarray  # [num_resamples] request-level bootstrap values
    num_requests: int


@dataclass(frozen=True)
class Estimate:
    point: float | None  # mean over repeats; None when undefined in every repeat
    replicates: np.ndarray | None  # [num_resamples]; None when there are too few requests and repeats
    num_requests: int  # over all repeats
    num_repeats: int
    repeat_points: tuple[float, ...] = ()  # [num_repeats] each repeat's own value (NaN where undefined)


def repeat_replicates(sample: RequestSample, estimator, draw: Draw) -> RepeatReplicates:
    point = float(estimator(sample, identity_draw(sample))[0])
    return RepeatReplicates(point, estimator(sample, draw), sample.num_requests)


def combine_repeats(repeats: list[RepeatReplicates], rng: np.random.Generator) -> Estimate:
    num_requests = sum(r.num_requests for r in repeats)
    points = np.array([r.point for r in repeats])
    each = tuple(float(p) for p in points)
    if np.isnan(points).all():
        return Estimate(None, None, num_requests, len(repeats), each)
    point = float(np.nanmean(points))
    enough = len(repeats) >= MIN_REPEATS or min(r.num_requests for r in repeats) >= MIN_REQUESTS
    if not enough:
        return Estimate(point, None, num_requests, len(repeats), each)
    table = np.stack([r.replicates for r in repeats])  # [num_repeats, num_resamples]
    if len(repeats) == 1:
        return Estimate(point, table[0], num_requests, 1, each)
    num_resamples = table.shape[1]
    which = rng.integers(len(repeats), size=(num_resamples, len(repeats)))
    column = rng.integers(num_resamples, size=(num_resamples, len(repeats)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN row (metric undefined) stays NaN
        replicates = np.nanmean(table[which, column], axis=1)
    return Estimate(point, replicates, num_requests, len(repeats), each)


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


def percentile_interval(replicates: np.ndarray | None, confidence: float) -> Interval | None:
    """Percentile interval of the finite replicates; None when under half of them are finite."""
    if replicates is None:
        return None
    finite = replicates[np.isfinite(replicates)]
    if finite.size < max(2, replicates.size // 2):
        return None
    alpha = (1 - confidence) / 2
    low, high = np.percentile(finite, [100 * alpha, 100 * (1 - alpha)])
    return Interval(float(low), float(high))
