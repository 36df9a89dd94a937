"""Bootstrap draws of a cell's requests, and the measured window each draw would have had.

The load pattern is the experiment's design and stays fixed: submission order, release times (arrival schedule)
and the concurrency cap. What is resampled is which request (its service time, tokens, acceptance) fills each
submission slot. The window of a draw comes from replaying the admission schedule with the drawn E2E times
(as specbench/backends/admission.py admits: next request into the first free slot, not before its release),
scaled so that the undrawn cell gets its measured window exactly. The replay keeps the tail (a last wave
waiting on its slowest request) that a per-request ratio cannot see.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specbench.compare.request_sample import RequestSample


@dataclass(frozen=True)
class Draw:
    indices: np.ndarray  # [num_resamples, num_requests] request filling each submission slot
    counts: np.ndarray  # [num_resamples, num_requests] multiplicity of each request (float, for matmuls)
    window_s: np.ndarray  # [num_resamples] measured window (last emission - first arrival) of each draw


def identity_draw(sample: RequestSample) -> Draw:
    """The cell as measured: every request once, in its own slot."""
    n = sample.num_requests
    return Draw(np.arange(n)[None, :], np.ones((1, n)), np.array([sample.window_s]))


def random_draw(sample: RequestSample, num_resamples: int, rng: np.random.Generator) -> Draw:
    n = sample.num_requests
    if n == 0:
        return Draw(np.zeros((num_resamples, 0), dtype=np.int64), np.zeros((num_resamples, 0)),
                    np.full(num_resamples, np.nan))
    indices = rng.integers(n, size=(num_resamples, n))
    rows = np.arange(num_resamples)[:, None]
    counts = np.bincount((rows * n + indices).ravel(), minlength=num_resamples * n).reshape(num_resamples, n)
    measured = makespan(sample.busy_s[None, :], sample.release_s, sample.concurrency)[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = sample.window_s / measured if measured > 0 else np.nan
    window = makespan(sample.busy_s[indices], sample.release_s, sample.concurrency) * scale
    return Draw(indices, counts.astype(np.float64), window)


def makespan(service_s: np.ndarray, release_s: np.ndarray, concurrency: int) -> np.ndarray:
    """service_s: [num_draws, num_requests] in submission order; release_s: [num_requests] earliest start of each
    slot. List scheduling on `concurrency` slots; returns [num_draws] last finish - first start."""
    num_draws, n = service_s.shape
    slots = np.zeros((num_draws, max(1, min(concurrency, n))))  # when each slot frees
    rows = np.arange(num_draws)
    first_start = np.full(num_draws, np.inf)
    for i in range(n):
        slot = slots.argmin(axis=1)
        start = np.maximum(slots[rows, slot], release_s[i])
        first_start = np.minimum(first_start, start)
        slots[rows, slot] = start + service_s[:, i]
    return slots.max(axis=1) - first_start
