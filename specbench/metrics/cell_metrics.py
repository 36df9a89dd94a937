"""Metrics of one sweep cell (a measured window of requests) and its flat row for cells.parquet."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.metrics.acceptance import AcceptanceMetrics
from specbench.metrics.distribution import Distribution
from specbench.metrics.pooled import Pooled
from specbench.metrics.request_metrics import RequestMetrics
from specbench.metrics.specs import (
    OUTPUT_THROUGHPUT,
    REQUEST_THROUGHPUT,
    TOKENS_PER_EMISSION,
    TOTAL_THROUGHPUT,
)

Row = dict[str, float | int | bool | None]


@dataclass(frozen=True, slots=True)
class CellMetrics:
    num_requests: int
    duration_s: float  # measured window
    num_prompt_tokens: int
    num_output_tokens: int
    num_emissions: int
    output_throughput: float | None  # output tokens / s; None for an empty window
    total_throughput: float | None  # (prompt + output) tokens / s
    request_throughput: float | None  # requests / s
    ttft_s: Distribution
    tpot_s: Distribution
    itl_s: Distribution  # pooled emission gaps
    e2e_s: Distribution
    tokens_per_emission: float | None  # pooled: output tokens / emissions
    acceptance: AcceptanceMetrics

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
            output_throughput=OUTPUT_THROUGHPUT.cell_value(pooled),
            total_throughput=TOTAL_THROUGHPUT.cell_value(pooled),
            request_throughput=REQUEST_THROUGHPUT.cell_value(pooled),
            ttft_s=Distribution.of(r.ttft_s for r in requests),
            tpot_s=Distribution.of(r.tpot_s for r in requests),
            itl_s=Distribution.of(gap for r in requests for gap in r.itl_s),
            e2e_s=Distribution.of(r.e2e_s for r in requests),
            tokens_per_emission=TOKENS_PER_EMISSION.cell_value(pooled),
            acceptance=AcceptanceMetrics.of(requests, pooled),
        )

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
            "output_throughput": self.output_throughput,
            "total_throughput": self.total_throughput,
            "request_throughput": self.request_throughput,
            "tokens_per_emission": self.tokens_per_emission,
        }
        for prefix in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
            row.update(getattr(self, prefix).to_row(prefix))
        row.update(
            num_draft_rounds=acc.num_draft_rounds,
            num_draft_tokens=acc.num_draft_tokens,
            num_accepted_tokens=acc.num_accepted_tokens,
            acceptance_rate=acc.acceptance_rate,
            acceptance_length=acc.acceptance_length,
            acceptance_length_per_request=acc.acceptance_length_per_request,
            acceptance_length_from_positions=acc.acceptance_length_from_positions,
            is_acceptance_consistent=acc.is_consistent,
        )
        width = len(acc.num_accepted_per_pos) if num_positions is None else num_positions
        for k in range(width):
            row[f"accept_rate_pos_{k + 1}"] = acc.accept_rate_per_pos[k] if k < len(acc.accept_rate_per_pos) else None
            row[f"cond_accept_rate_pos_{k + 1}"] = (
                acc.cond_accept_rate_per_pos[k] if k < len(acc.cond_accept_rate_per_pos) else None
            )
        return row


def speedup(cell: CellMetrics, baseline_cell: CellMetrics) -> float | None:
    """Output-throughput ratio against the num-steps=0 cell of the same (concurrency, temperature)."""
    if cell.output_throughput is None or not baseline_cell.output_throughput:
        return None
    return cell.output_throughput / baseline_cell.output_throughput
