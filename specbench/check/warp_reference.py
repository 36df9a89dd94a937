"""An independent numpy statement of sampling's warping (temperature, then top-k, then top-p, renormalized), so the
checks' expected distributions never come from the code they check (spec.sampling.logits_to_probs)."""

from __future__ import annotations

import numpy as np


def warp(logits: np.ndarray, temperature: float, top_k: int, top_p: float) -> np.ndarray:
    """logits: [n, V] -> [n, V] float64 probabilities. top_k -1 = off; ties with the k-th logit are kept; top-p keeps
    the shortest most-likely-first prefix whose mass reaches top_p (the likeliest token always)."""
    z = logits.astype(np.float64) / temperature
    if 0 < top_k < z.shape[1]:
        kth = -np.sort(-z, axis=1)[:, top_k - 1 : top_k]
        z = np.where(z < kth, -np.inf, z)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    order = np.argsort(-p, axis=1, kind="stable")
    sorted_p = np.take_along_axis(p, order, axis=1)
    mass_before = np.cumsum(sorted_p, axis=1) - sorted_p
    sorted_p = np.where(mass_before >= top_p, 0.0, sorted_p)
    out = np.zeros_like(p)
    np.put_along_axis(out, order, sorted_p, axis=1)
    return out / out.sum(axis=1, keepdims=True)
