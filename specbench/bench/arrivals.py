"""Request arrival schedule of a cell: all at once, or Poisson (gamma when bursty) at a given rate."""

from __future__ import annotations

import math

import numpy as np


def arrival_offsets(num_requests: int, request_rate: float, burstiness: float, seed: int) -> list[float]:
    """Seconds after the cell starts at which each first turn arrives (0 for an infinite rate).

    Inter-arrival gaps are gamma(shape=burstiness, scale=1 / (rate * burstiness)): mean 1 / rate; shape 1 is
    the exponential of a Poisson process, shape < 1 burstier, > 1 more regular. The first request arrives at 0.
    """
    if math.isinf(request_rate):
        return [0.0] * num_requests
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (request_rate * burstiness), size=max(num_requests - 1, 0))
    return [0.0] + np.cumsum(gaps).tolist()
