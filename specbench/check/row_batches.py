"""Hand-built verify batches whose every output row has a known distribution, one batch per row type.

Row types of speculative sampling, for a request with warped target p and draft q at a row, draft d ~ q:
- accepted: d accepted (prob min(p, q)(d) / q(d)); its token follows min(p, q) / sum min(p, q);
- recovered: the first rejection; its token follows (p - q)+ / sum (p - q)+;
- bonus: after every draft is accepted; its token follows p at the row after the last draft.
Requests cycle through NUM_GROUPS different distributions so a bug taking another request's row moves tokens.

The bonus batch's last draft is a point mass on the bonus row's likeliest token: a verifier that leaves the last
draft row's law inside the bonus residual (samples (p - q_last)+ instead of p) then never emits that token, a shift
of its whole mass. Drafts on random tokens would hide it: each row loses p(d) for a random d, and over the batch
those losses nearly cancel in the mean law the test sees.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from specbench.check.warp_reference import warp

VOCAB = 16
NUM_GROUPS = 3
SPIKE = 40.0  # logit added to a forced draft: after warping the target keeps only that token
TARGET_SCALE, DRAFT_NOISE = 1.0, 1.0  # logits N(0, scale^2); the draft adds N(0, noise^2): acceptance ~0.5


@dataclass(frozen=True)
class Warping:
    temperature: float
    top_k: int
    top_p: float


@dataclass(frozen=True)
class RowBatch:
    """Inputs of one verify call and, per output row type, each sample's expected distribution."""
    target_logits: torch.Tensor  # [num_reqs * (num_draft + 1), VOCAB]
    draft_token_ids: torch.Tensor  # [num_reqs, num_draft]
    draft_probs: torch.Tensor  # [num_reqs, num_draft, VOCAB]
    accepted_dist: np.ndarray  # [num_reqs, VOCAB] law of output row 0 given acceptance (accept batch)
    recovered_dist: np.ndarray  # [num_reqs, VOCAB] law of output row 0 given rejection (accept batch)
    bonus_dist: np.ndarray  # [num_reqs, VOCAB] law of the bonus row given full acceptance
    # [num_reqs, VOCAB] the bonus law of a verifier that leaves the last draft row's law in the bonus residual
    residual_bonus_dist: np.ndarray
    accept_mass: np.ndarray  # [num_reqs] probability that row 0's draft is accepted, sum_x min(p, q)(x)


def _group_logits(rng: np.random.Generator, num_rows: int) -> np.ndarray:  # [NUM_GROUPS, num_rows, VOCAB]
    """float32-representable, so the laws computed here are those of the float32 logits the verifier gets."""
    return rng.normal(0.0, TARGET_SCALE, (NUM_GROUPS, num_rows, VOCAB)).astype(np.float32).astype(np.float64)


def accept_batch(num_reqs: int, w: Warping, rng: np.random.Generator) -> RowBatch:
    """One draft per request, drawn from q: row 0 is accepted or recovered, row 1 a bonus after acceptance."""
    target = _group_logits(rng, 2)  # rows 0 (draft row) and 1 (bonus row)
    draft = target[:, 0] + rng.normal(0.0, DRAFT_NOISE, (NUM_GROUPS, VOCAB))  # q is passed as probabilities
    group = np.arange(num_reqs) % NUM_GROUPS
    p0 = warp(target[:, 0], w.temperature, w.top_k, w.top_p)[group]  # warped per group, then per request
    q = warp(draft, w.temperature, w.top_k, w.top_p)[group]
    d = _draw(q, rng)
    both = np.minimum(p0, q)
    residual = np.clip(p0 - q, 0.0, None)
    return RowBatch(
        target_logits=torch.from_numpy(target[group].reshape(-1, VOCAB)).float(),
        draft_token_ids=torch.from_numpy(d[:, None]),
        draft_probs=torch.from_numpy(q[:, None, :]).float(),
        accepted_dist=both / both.sum(1, keepdims=True),
        recovered_dist=residual / np.maximum(residual.sum(1, keepdims=True), 1e-300),  # 0 where p = q: never rejected
        bonus_dist=warp(target[:, 1], w.temperature, w.top_k, w.top_p)[group],
        residual_bonus_dist=np.zeros((num_reqs, VOCAB)),  # the bonus rows here are not tested
        accept_mass=both.sum(1),
    )


def bonus_batch(num_reqs: int, num_draft: int, w: Warping, rng: np.random.Generator,
                is_last_draft_likeliest: bool = True) -> RowBatch:
    """num_draft drafts the target takes with certainty (its logit spiked, the draft a point mass), so every request
    is fully accepted and row num_draft is a bonus row on its own. The last draft is the bonus row's likeliest token
    (`is_last_draft_likeliest`, see the module doc), the others random."""
    target = _group_logits(rng, num_draft + 1)
    group = np.arange(num_reqs) % NUM_GROUPS
    logits = target[group]  # [num_reqs, num_draft + 1, VOCAB]
    bonus = warp(target[:, num_draft], w.temperature, w.top_k, w.top_p)[group]  # the bonus row is unspiked
    d = rng.integers(0, VOCAB, (num_reqs, num_draft))
    if is_last_draft_likeliest:
        d[:, -1] = bonus.argmax(1)
    rows = np.arange(num_reqs)[:, None]
    logits[rows, np.arange(num_draft)[None, :], d] += SPIKE
    probs = np.zeros((num_reqs, num_draft, VOCAB))
    probs[rows, np.arange(num_draft)[None, :], d] = 1.0
    residual = np.clip(bonus - probs[:, -1], 0.0, None)
    residual = np.where(residual.sum(1, keepdims=True) > 0, residual, bonus)  # the verifier's zero-residual fallback
    empty = np.zeros((num_reqs, VOCAB))
    return RowBatch(
        target_logits=torch.from_numpy(logits.reshape(-1, VOCAB)).float(),
        draft_token_ids=torch.from_numpy(d),
        draft_probs=torch.from_numpy(probs).float(),
        accepted_dist=empty, recovered_dist=empty,
        bonus_dist=bonus,
        residual_bonus_dist=residual / residual.sum(1, keepdims=True),
        accept_mass=np.ones(num_reqs),
    )


def _draw(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:  # [n, V] -> [n] int64
    u = rng.random((probs.shape[0], 1))
    return np.minimum((np.cumsum(probs, axis=1) < u).sum(1), probs.shape[1] - 1).astype(np.int64)
