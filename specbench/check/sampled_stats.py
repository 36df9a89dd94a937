"""Goodness of fit of sampled tokens to their known per-sample distributions, and the power of the test.

A cell is one (prompt, output position); sample s of it should have drawn its token from p_s, the target's
distribution given that sample's own earlier tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

MIN_EXPECTED = 5.0  # a token gets its own category from this expected count on


def choose_categories(expected: np.ndarray) -> np.ndarray:
    """expected: [vocab] summed probabilities of a cell -> token ids with their own category, most expected first.

    Every other token forms the last category; when that one's expected count is below MIN_EXPECTED, the least
    expected own token joins it, so every category has expected count >= MIN_EXPECTED.
    """
    order = np.argsort(-expected, kind="stable")
    own = order[expected[order] >= MIN_EXPECTED]
    if len(own) and expected.sum() - expected[own].sum() < MIN_EXPECTED:
        own = own[:-1]
    return own


def category_probs(probs: np.ndarray, own: np.ndarray) -> np.ndarray:
    """probs: [n, vocab] -> [n, len(own) + 1], the last column the rest's mass."""
    kept = probs[:, own].astype(np.float64)
    return np.concatenate([kept, np.clip(1.0 - kept.sum(1, keepdims=True), 0.0, None)], axis=1)


def category_of(tokens: np.ndarray, own: np.ndarray) -> np.ndarray:
    """tokens: [n] -> [n] category index (len(own) = the rest)."""
    lookup = np.full(max(int(tokens.max(initial=0)), int(own.max(initial=0))) + 1, len(own), dtype=np.int64)
    lookup[own] = np.arange(len(own))
    return lookup[tokens]


@dataclass(frozen=True)
class CellTest:
    statistic: float  # Q
    dof: int  # number of categories - 1; 0 = nothing to test (one category)
    p_value: float
    sensitivity: float  # noncentrality per (mass moved)^2 from category 0 to 1 in every sample of the cell
    top_mass: float  # mean probability of category 0: the most mass such a move can take


def cell_test(probs: np.ndarray, observed: np.ndarray) -> CellTest:
    """probs: [n, K] category probabilities per sample, observed: [n] category indices.

    Under the null D = sum_s (onehot(x_s) - p_s) has mean 0 and covariance sum_s (diag(p_s) - p_s p_s^T), so
    Q = D^T Cov^-1 D over K - 1 categories is asymptotically chi-square(K - 1) (categories are fixed by expected
    counts, never by what was observed). Positions of one sequence are martingale differences: the cells of
    a prompt are asymptotically independent and their Q add up.
    """
    n, k = probs.shape
    if k < 2:
        return CellTest(0.0, 0, 1.0, 0.0, 1.0)
    expected = probs.sum(0)
    d = (np.bincount(observed, minlength=k) - expected)[:-1]
    cov = (np.diag(expected) - probs.T @ probs)[:-1, :-1]
    move = np.zeros(k)
    move[0], move[1] = -n, n
    move = move[:-1]
    try:  # positive definite: every category has expected count >= MIN_EXPECTED
        solved = np.linalg.solve(cov, np.stack([d, move], axis=1))
    except np.linalg.LinAlgError:
        solved = np.linalg.pinv(cov, hermitian=True) @ np.stack([d, move], axis=1)
    q = float(d @ solved[:, 0])
    return CellTest(q, k - 1, float(special.chdtrc(k - 1, q)), float(move @ solved[:, 1]), float(expected[0] / n))


@dataclass(frozen=True)
class SampledVerdict:
    p_value: float  # 2 x min(pooled p, Bonferroni min-cell p), capped at 1
    pooled_statistic: float
    pooled_dof: int
    pooled_p: float
    worst_cell: int  # index into the cells
    worst_cell_p: float  # uncorrected
    num_cells: int  # cells with something to test
    cell_dofs: tuple[int, ...]  # [num cells]
    power_local: tuple[float, ...]  # [num cells] power vs the local shift at that cell alone (0 where untested)
    power_diffuse: float  # vs the diffuse shift at every cell

    @property
    def power_local_summary(self) -> tuple[float, float]:
        """(median, min) of the local power over the tested cells."""
        tested = [p for p, dof in zip(self.power_local, self.cell_dofs) if dof > 0]
        return (float(np.median(tested)), min(tested)) if tested else (0.0, 0.0)


def _noncentrality(cell: CellTest, shift: float) -> float:
    return min(shift, cell.top_mass) ** 2 * cell.sensitivity


def combine(cells: list[CellTest], alpha: float, local_shift: float, diffuse_shift: float) -> SampledVerdict:
    """Pooled and max-cell tests at alpha / 2 each (the p-value is Bonferroni over the two).

    Powers are the noncentral chi-square approximations of the better component test at alpha / 2, which the
    combined test matches or beats (it rejects whenever either component does); the moved mass is capped by
    what category 0 holds on average."""
    tested = [i for i, c in enumerate(cells) if c.dof > 0]
    dofs = tuple(c.dof for c in cells)
    if not tested:
        return SampledVerdict(1.0, 0.0, 0, 1.0, 0, 1.0, 0, dofs, (0.0,) * len(cells), 0.0)
    q = sum(cells[i].statistic for i in tested)
    dof = sum(cells[i].dof for i in tested)
    pooled_p = float(special.chdtrc(dof, q))
    worst = min(tested, key=lambda i: cells[i].p_value)
    max_p = min(1.0, cells[worst].p_value * len(tested))
    cell_dof = np.array([cells[i].dof for i in tested], dtype=np.float64)
    local_lam = np.array([_noncentrality(cells[i], local_shift) for i in tested])
    cell_power = _power(special.chdtri(cell_dof, alpha / (2 * len(tested))), cell_dof, local_lam)
    pooled_critical = special.chdtri(dof, alpha / 2)
    local = [0.0] * len(cells)
    for i, power in zip(tested, np.maximum(cell_power, _power(pooled_critical, dof, local_lam))):
        local[i] = float(power)
    diffuse = float(_power(pooled_critical, dof, sum(_noncentrality(cells[i], diffuse_shift) for i in tested)))
    return SampledVerdict(min(1.0, 2 * min(pooled_p, max_p)), q, dof, pooled_p, worst, cells[worst].p_value,
                          len(tested), dofs, tuple(local), diffuse)


def _power(critical, dof, noncentrality):
    """P(noncentral chi-square(dof, noncentrality) > critical), elementwise."""
    return 1.0 - special.chndtr(critical, dof, noncentrality)
