"""Percentiles of a sample taken with multiplicities: numpy's linear percentile of the expanded sample, exactly.

Large samples (pooled ITL gaps: ~1e5-1e6 values) are searched in two stages, so the cost is
O(resamples x (requests x blocks + block size)) instead of O(resamples x values).
"""

from __future__ import annotations

import math

import numpy as np

DIRECT_MAX_VALUES = 4096  # above this, the blocked search
MAX_CHUNK_ELEMENTS = 4_000_000  # bounds the [chunk, width] work arrays


def weighted_quantile(
    values: np.ndarray, owner: np.ndarray, counts: np.ndarray, q: float, block_size: int | None = None
) -> np.ndarray:
    """values: [num_values]; owner: [num_values] index of the request each value belongs to;
    counts: [num_resamples, num_requests] integer multiplicities of the requests.

    Returns [num_resamples]: np.percentile(the values repeated counts[b, owner] times, 100 q) (NaN if empty).
    """
    out = np.full(counts.shape[0], np.nan)
    if len(values) == 0:
        return out
    order = np.argsort(values, kind="stable")
    sorted_values, sorted_owner = values[order], owner[order]
    counts = counts.astype(np.int64, copy=False)
    if block_size is None:
        block_size = len(values) if len(values) <= DIRECT_MAX_VALUES else max(64, math.isqrt(len(values)))
    chunk = max(1, MAX_CHUNK_ELEMENTS // max(block_size, counts.shape[1]))
    blocks = _BlockIndex(sorted_owner, counts.shape[1], block_size)
    for start in range(0, counts.shape[0], chunk):
        rows = counts[start : start + chunk]
        cumulative = blocks.cumulative(rows)  # [rows, num_blocks] (or [rows, num_values] with one block)
        total = cumulative[:, -1]
        position = np.maximum((total - 1) * q, 0)  # 0-based rank in the expanded sample (numpy's "linear")
        below = np.floor(position).astype(np.int64)
        lo, hi = blocks.index_of_rank(rows, cumulative, below), blocks.index_of_rank(rows, cumulative, below + 1)
        result = sorted_values[lo] + (position - below) * (sorted_values[hi] - sorted_values[lo])
        out[start : start + chunk] = np.where(total > 0, result, np.nan)
    return out


class _BlockIndex:
    """Sorted values cut into consecutive blocks; per request, how many of its values fall in each block."""

    def __init__(self, sorted_owner: np.ndarray, num_requests: int, block_size: int) -> None:
        self.sorted_owner, self.block_size = sorted_owner, block_size
        self.num_values = len(sorted_owner)
        self.num_blocks = -(-self.num_values // block_size)
        block = np.arange(self.num_values) // block_size
        flat = np.bincount(sorted_owner * self.num_blocks + block, minlength=num_requests * self.num_blocks)
        # float: BLAS matmul, exact for counts below 2**53
        self.per_block = flat.reshape(num_requests, self.num_blocks).astype(np.float64)  # [num_requests, num_blocks]

    def cumulative(self, counts: np.ndarray) -> np.ndarray:
        """One block: cumulative counts over the sorted values [rows, num_values]; else over blocks."""
        if self.num_blocks == 1:
            return np.cumsum(counts[:, self.sorted_owner], axis=1)
        return np.rint(np.cumsum(counts.astype(np.float64) @ self.per_block, axis=1)).astype(np.int64)

    def index_of_rank(self, counts: np.ndarray, cumulative: np.ndarray, rank: np.ndarray) -> np.ndarray:
        """counts: [rows, num_requests], rank: [rows] -> [rows] sorted index of the value at expanded rank
        (the first value whose cumulative count exceeds rank), clipped to the last value."""
        if self.num_blocks == 1:
            return np.minimum(_first_above(cumulative, rank), self.num_values - 1)
        rows = np.arange(len(rank))
        block = np.minimum(_first_above(cumulative, rank), self.num_blocks - 1)
        before = np.where(block > 0, cumulative[rows, np.maximum(block - 1, 0)], 0)
        positions = block[:, None] * self.block_size + np.arange(self.block_size)  # [rows, block_size]
        inside = positions < self.num_values
        owners = self.sorted_owner[np.minimum(positions, self.num_values - 1)]
        within = np.cumsum(np.where(inside, counts[rows[:, None], owners], 0), axis=1)
        local = _first_above(within, rank - before)
        return np.minimum(block * self.block_size + local, self.num_values - 1)


def _first_above(cumulative: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Per row of non-decreasing `cumulative` [rows, width]: the first column whose value exceeds rank[row]
    (width if none). Offsetting each row above the previous one makes the flattened array sorted."""
    rows, width = cumulative.shape
    offsets = np.arange(rows, dtype=np.int64) * (int(cumulative[:, -1].max(initial=0)) + 2)
    flat = (cumulative + offsets[:, None]).ravel()
    return np.searchsorted(flat, rank + offsets, side="right") - np.arange(rows) * width
