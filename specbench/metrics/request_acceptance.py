"""Acceptance per request: its distribution over a cell's requests (a histogram and quantiles).

A cell's acceptance length is token-weighted (1 + A / D over all rounds): one long easy request can carry it.
The per-request values AL_i = 1 + A_i / D_i show whether the cell is uniform or bimodal (some prompts accept
everything, others nothing). The histogram splits [1, k + 1], the values AL_i can take at k drafts a round, into
NUM_HISTOGRAM_BINS equal bins, the last one closed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

NUM_HISTOGRAM_BINS = 8
QUANTILES = (10, 50, 90)  # acceptance_length_request_p{q}
SPARK = "▁▂▃▄▅▆▇█"


def acceptance_histogram(lengths: Sequence[float], num_steps: int) -> list[int]:
    """[NUM_HISTOGRAM_BINS] requests per bin of [1, num_steps + 1]; values outside are clipped into the end bins."""
    if num_steps <= 0:
        raise ValueError("a histogram of acceptance needs num_steps > 0")
    width = num_steps / NUM_HISTOGRAM_BINS
    counts = [0] * NUM_HISTOGRAM_BINS
    for value in lengths:
        counts[min(NUM_HISTOGRAM_BINS - 1, max(0, int((value - 1.0) // width)))] += 1
    return counts


def acceptance_quantiles(lengths: Sequence[float]) -> tuple[float | None, ...]:
    """AL_i at QUANTILES (linear interpolation); None each without requests."""
    if not lengths:
        return (None,) * len(QUANTILES)
    return tuple(float(np.percentile(np.asarray(lengths, dtype=np.float64), q)) for q in QUANTILES)


def sparkline(counts: Sequence[int]) -> str:
    """One character per bin, its height relative to the fullest bin (' ' for an empty bin)."""
    top = max(counts, default=0)
    if top == 0:
        return " " * len(counts)
    return "".join(" " if c == 0 else SPARK[min(len(SPARK) - 1, (c * len(SPARK) - 1) // top)] for c in counts)
