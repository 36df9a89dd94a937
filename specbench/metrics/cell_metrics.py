"""Metrics of one sweep cell (a measured window of requests) and its flat row for cells.parquet."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.metrics import definitions
from specbench.metrics.acceptance import AcceptanceMetrics
from specbench.metrics.distribution import Distribution
from specbench.metrics.pooled import Pooled
from specbench.metrics.request_metrics import RequestMetrics
from specbench.metrics.specs import (
    CELL_POOLED_METRICS,
    OUTPUT_THROUGHPUT,
    REQUEST_THROUGHPUT,
    TOKENS_PER_EMISSION,
    TOTAL_THROUGHPUT,
    TREE_DEPTH_RATES,
    TREE_RANK_RATES,
    depth_metric,
    position_metric,
    rank_metric,
)

Row = dict[str, float | int | bool | None]


@dataclass(frozen=True, slots=True)
class CellMetrics:
    num_requests: int
    duration_s: float  # measured window
    num_prompt_tokens: int
    num_output_tokens: int
    num_emissions: int
    pooled: Pooled  # the window's pooled counts: the pooled metrics (metrics/specs.py) are computed from them
    ttft_s: Distribution
    tpot_s: Distribution
    itl_s: Distribution  # pooled emission gaps
    e2e_s: Distribution
    acceptance: AcceptanceMetrics

    @property
    def output_throughput(self) -> float | None:
        """Output tokens / s; None for an empty window."""
        return OUTPUT_THROUGHPUT.cell_value(self.pooled)

    @property
    def total_throughput(self) -> float | None:
        return TOTAL_THROUGHPUT.cell_value(self.pooled)

    @property
    def request_throughput(self) -> float | None:
        return REQUEST_THROUGHPUT.cell_value(self.pooled)

    @property
    def tokens_per_emission(self) -> float | None:
        return TOKENS_PER_EMISSION.cell_value(self.pooled)

    @classmethod
    def of(cls, requests: Sequence[RequestMetrics], duration_s: float | None = None) -> CellMetrics:
        """Aggregate measured requests; the window defaults to last emission - first arrival."""
        finishes = [r.finish_time for r in requests if r.finish_time is not None]
        if duration_s is None:
            duration_s = max(finishes) - min(r.arrival_time for r in requests) if finishes else 0.0
        pooled = Pooled.cell(requests, duration_s)
        return cls(
            num_requests=len(requests),
            duration_s=duration_s,
            num_prompt_tokens=sum(r.num_prompt_tokens for r in requests),
            num_output_tokens=sum(r.num_output_tokens for r in requests),
            num_emissions=sum(r.num_emissions for r in requests),
            pooled=pooled,
            ttft_s=Distribution.of(r.ttft_s for r in requests),
            tpot_s=Distribution.of(r.tpot_s for r in requests),
            itl_s=Distribution.of(gap for r in requests for gap in r.itl_s),
            e2e_s=Distribution.of(r.e2e_s for r in requests),
            acceptance=AcceptanceMetrics.of(requests, pooled),
        )

    def _tree_rates(self) -> Row:
        """Per-depth and per-rank tree acceptance as lists (null for a chain cell)."""
        tree = self.pooled.counts.tree
        if tree is None:
            return {TREE_DEPTH_RATES: None, TREE_RANK_RATES: None}
        return {
            TREE_DEPTH_RATES: [depth_metric(d).cell_value(self.pooled)
                               for d in range(1, tree.offered_per_depth.shape[1] + 1)],
            TREE_RANK_RATES: [rank_metric(r).cell_value(self.pooled) for r in range(tree.offered_per_rank.shape[1])],
        }

    def to_row(self, num_positions: int | None = None) -> Row:
        """Flat scalar columns. Per-position lists become `accept_rate_pos_{k}` / `cond_accept_rate_pos_{k}`
        (k = 1..num_positions, missing positions None) so every cell of a sweep can share one schema;
        the histogram is left out (per-request data holds it)."""
        acc = self.acceptance
        row: Row = {
            "num_requests": self.num_requests,
            "duration_s": self.duration_s,
            "num_prompt_tokens": self.num_prompt_tokens,
            "num_output_tokens": self.num_output_tokens,
            "num_emissions": self.num_emissions,
            **{metric.column: metric.cell_value(self.pooled) for metric in CELL_POOLED_METRICS},
        }
        for prefix in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
            row.update(getattr(self, prefix).to_row(prefix))
        row.update(
            num_draft_rounds=acc.num_draft_rounds,
            num_draft_tokens=acc.num_draft_tokens,
            num_accepted_tokens=acc.num_accepted_tokens,
            acceptance_length_per_request=acc.acceptance_length_per_request,
            acceptance_length_from_positions=acc.acceptance_length_from_positions,
            is_acceptance_consistent=acc.is_consistent,
            **self._tree_rates(),
        )
        width = len(acc.num_accepted_per_pos) if num_positions is None else num_positions
        for k in range(width):
            row[position_metric(k + 1).column] = (
                acc.accept_rate_per_pos[k] if k < len(acc.accept_rate_per_pos) else None
            )
            row[f"cond_accept_rate_pos_{k + 1}"] = (
                acc.cond_accept_rate_per_pos[k] if k < len(acc.cond_accept_rate_per_pos) else None
            )
        return row


def speedup(cell: CellMetrics, baseline_cell: CellMetrics) -> float | None:
    """Output-throughput ratio against the num-steps=0 cell of the same (concurrency, temperature)."""
    if cell.output_throughput is None or not baseline_cell.output_throughput:
        return None
    return definitions.speedup(cell.output_throughput, baseline_cell.output_throughput)
