"""Counts summed over a cell's requests, or over each bootstrap draw of them: what every pooled metric
(metrics/specs.py) is computed from, so a cell's value and compare's replicates come from one computation."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from specbench.metrics.request_metrics import RequestMetrics


def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator where denominator > 0, else NaN (undefined: no window, no drafts, ...)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1.0), np.nan)


def where_positive(formula: Callable[[np.ndarray, np.ndarray], np.ndarray], numerator: np.ndarray,
                   denominator: np.ndarray) -> np.ndarray:
    """formula(numerator, denominator) where denominator > 0, else NaN (a formula of metrics/definitions.py)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, formula(numerator, np.where(denominator > 0, denominator, 1.0)), np.nan)


@dataclass(frozen=True)
class RequestCounts:
    """Per-request counts of one cell (repeat), in submission order. Draft counts are NaN where a request's counts
    are unknown (HTTP without per-request draft stats); `is_good` is NaN without --goodput."""

    num_prompt_tokens: np.ndarray  # [num_requests]
    num_output_tokens: np.ndarray  # [num_requests]
    num_emissions: np.ndarray  # [num_requests]
    num_draft_rounds: np.ndarray  # [num_requests] D_i
    num_draft_tokens: np.ndarray  # [num_requests] T_d,i
    num_accepted_tokens: np.ndarray  # [num_requests] A_i
    num_accepted_per_pos: np.ndarray  # [num_requests, num_positions] rounds accepting draft position k + 1
    is_good: np.ndarray  # [num_requests] 1.0 meets every --goodput bound, 0.0 not, NaN without --goodput
    tree: TreeRequestCounts | None = None  # None: no request drafted a tree (chains; HTTP)

    @property
    def num_requests(self) -> int:
        return len(self.num_output_tokens)

    @classmethod
    def of(cls, requests: Sequence[RequestMetrics], is_draft_known: np.ndarray | None = None,
           is_good: np.ndarray | None = None) -> RequestCounts:
        """`is_draft_known`: [num_requests] bool, False where the draft counts are unknown (default: all known);
        `is_good`: [num_requests] (default: NaN, no --goodput)."""
        n = len(requests)
        known = np.ones(n, dtype=bool) if is_draft_known is None else is_draft_known
        width = max((len(r.num_accepted_per_pos) for r in requests), default=0)
        per_pos = np.zeros((n, width))
        for i, r in enumerate(requests):
            per_pos[i, : len(r.num_accepted_per_pos)] = r.num_accepted_per_pos

        def column(name: str) -> np.ndarray:
            return np.array([getattr(r, name) for r in requests], dtype=np.float64)

        def draft_column(name: str) -> np.ndarray:
            return np.where(known, column(name), np.nan)

        return cls(
            num_prompt_tokens=column("num_prompt_tokens"),
            num_output_tokens=column("num_output_tokens"),
            num_emissions=column("num_emissions"),
            num_draft_rounds=draft_column("num_draft_rounds"),
            num_draft_tokens=draft_column("num_draft_tokens"),
            num_accepted_tokens=draft_column("num_accepted_tokens"),
            num_accepted_per_pos=np.where(known[:, None], per_pos, np.nan),
            is_good=np.full(n, np.nan) if is_good is None else is_good,
            tree=TreeRequestCounts.of(requests, known),
        )


def _padded(rows: list[list[int]], known: np.ndarray) -> np.ndarray:
    """[num_requests, widest row] zeros past each row's end; NaN rows where the counts are unknown."""
    out = np.zeros((len(rows), max((len(r) for r in rows), default=0)))
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return np.where(known[:, None], out, np.nan)


@dataclass(frozen=True)
class TreeRequestCounts:
    """Per-request tree counts (speculation/verify/tree_stats.py): zeros for a request that drafted chains only."""

    num_rounds: np.ndarray  # [num_requests] tree request-rounds
    num_nodes: np.ndarray  # [num_requests] drafted tree nodes, summed over rounds
    offered_per_depth: np.ndarray  # [num_requests, max_depth] (depth d + 1: d draft tokens from the root)
    accepted_per_depth: np.ndarray  # [num_requests, max_depth]
    offered_per_rank: np.ndarray  # [num_requests, max_rank + 1] (rank 0 = the drafter's best child)
    accepted_per_rank: np.ndarray  # [num_requests, max_rank + 1]

    @classmethod
    def of(cls, requests: Sequence[RequestMetrics], known: np.ndarray) -> TreeRequestCounts | None:
        trees = [r.tree for r in requests]
        if all(t is None for t in trees):
            return None

        def per_request(name: str) -> list[list[int]]:
            return [[] if t is None else list(getattr(t, name)) for t in trees]

        def totals(name: str) -> np.ndarray:
            return np.where(known, [0.0 if t is None else float(getattr(t, name)) for t in trees], np.nan)

        return cls(
            num_rounds=totals("num_rounds"),
            num_nodes=totals("num_nodes"),
            offered_per_depth=_padded(per_request("offered_per_depth"), known),
            accepted_per_depth=_padded(per_request("accepted_per_depth"), known),
            offered_per_rank=_padded(per_request("offered_per_rank"), known),
            accepted_per_rank=_padded(per_request("accepted_per_rank"), known),
        )


class Pooled:
    """Sums of `RequestCounts` weighted by how often each request is drawn: [num_draws] each (computed on use)."""

    def __init__(self, counts: RequestCounts, weights: np.ndarray, window_s: np.ndarray) -> None:
        """weights: [num_draws, num_requests] multiplicity of each request; window_s: [num_draws] measured window."""
        self.counts, self.weights, self.window_s = counts, weights, window_s

    @classmethod
    def cell(cls, requests: Sequence[RequestMetrics], window_s: float) -> Pooled:
        """The cell as measured: one draw, every request once."""
        return cls(RequestCounts.of(requests), np.ones((1, len(requests))), np.array([window_s], dtype=np.float64))

    @property
    def num_draws(self) -> int:
        return self.weights.shape[0]

    def _sum(self, values: np.ndarray) -> np.ndarray:
        return self.weights @ values

    @cached_property
    def num_requests(self) -> np.ndarray:
        return self.weights.sum(axis=1)

    @cached_property
    def num_prompt_tokens(self) -> np.ndarray:
        return self._sum(self.counts.num_prompt_tokens)

    @cached_property
    def num_output_tokens(self) -> np.ndarray:
        return self._sum(self.counts.num_output_tokens)

    @cached_property
    def num_emissions(self) -> np.ndarray:
        return self._sum(self.counts.num_emissions)

    @cached_property
    def num_draft_rounds(self) -> np.ndarray:
        return self._sum(self.counts.num_draft_rounds)

    @cached_property
    def num_draft_tokens(self) -> np.ndarray:
        return self._sum(self.counts.num_draft_tokens)

    @cached_property
    def num_accepted_tokens(self) -> np.ndarray:
        return self._sum(self.counts.num_accepted_tokens)

    def num_accepted_at(self, position: int) -> np.ndarray:
        """A_k for 1-based draft position k; NaN past the widest request."""
        if position > self.counts.num_accepted_per_pos.shape[1]:
            return np.full(self.num_draws, np.nan)
        return self._sum(self.counts.num_accepted_per_pos[:, position - 1])

    def _good(self, values: np.ndarray) -> np.ndarray:
        """weights @ (is_good x values); NaN without --goodput (or without requests)."""
        if self.counts.num_requests == 0 or np.isnan(self.counts.is_good).any():
            return np.full(self.num_draws, np.nan)
        return self._sum(self.counts.is_good * values)

    @cached_property
    def num_good_requests(self) -> np.ndarray:
        return self._good(np.ones(self.counts.num_requests))

    @cached_property
    def num_good_output_tokens(self) -> np.ndarray:
        return self._good(self.counts.num_output_tokens)

    def _tree_sum(self, name: str) -> np.ndarray:
        """A tree count summed per draw; NaN when no request drafted a tree (a chain cell: tree metrics N/A)."""
        tree = self.counts.tree
        return np.full(self.num_draws, np.nan) if tree is None else self._sum(getattr(tree, name))

    def _tree_at(self, name: str, index: int) -> np.ndarray:
        """Column `index` (0-based depth or rank) of a per-request tree count matrix; NaN past the widest."""
        tree = self.counts.tree
        if tree is None or index >= getattr(tree, name).shape[1]:
            return np.full(self.num_draws, np.nan)
        return self._sum(getattr(tree, name)[:, index])

    @cached_property
    def num_tree_rounds(self) -> np.ndarray:
        return self._tree_sum("num_rounds")

    @cached_property
    def num_tree_nodes(self) -> np.ndarray:
        return self._tree_sum("num_nodes")

    def tree_offered_at_depth(self, depth: int) -> np.ndarray:
        """Rounds whose accepted path reached depth - 1 with children to try (1-based draft depth)."""
        return self._tree_at("offered_per_depth", depth - 1)

    def tree_accepted_at_depth(self, depth: int) -> np.ndarray:
        return self._tree_at("accepted_per_depth", depth - 1)

    def tree_offered_at_rank(self, rank: int) -> np.ndarray:
        """Path nodes with a child of sibling rank `rank` (0 = the drafter's best)."""
        return self._tree_at("offered_per_rank", rank)

    def tree_accepted_at_rank(self, rank: int) -> np.ndarray:
        return self._tree_at("accepted_per_rank", rank)
