"""Request and cell metrics on hand-built traces with hand-computed values (multi-token emissions included)."""

from __future__ import annotations

import pandas as pd
import pytest

from specbench.engine.stats import RequestStats
from specbench.metrics import CellMetrics, RequestMetrics, speedup

approx = pytest.approx


def trace_a() -> RequestStats:
    # 4 emissions of 1, 3, 2, 1 tokens; 3 verify rounds of 3 drafts accepting 2, 1, 0.
    return RequestStats(
        arrival_time=0.0, num_prompt_tokens=10, emission_times=[0.5, 0.7, 1.0, 1.1], tokens_per_emission=[1, 3, 2, 1],
        num_draft_rounds=3, num_draft_tokens=9, num_accepted_tokens=3,
        num_drafted_per_pos=[3, 3, 3], num_accepted_per_pos=[2, 1, 0], accepted_per_round=[2, 1, 0],
    )


def trace_b() -> RequestStats:
    # 3 emissions of 1, 4, 4 tokens; 2 rounds accepting all 3 drafts.
    return RequestStats(
        arrival_time=0.2, num_prompt_tokens=20, emission_times=[0.6, 0.9, 1.5], tokens_per_emission=[1, 4, 4],
        num_draft_rounds=2, num_draft_tokens=6, num_accepted_tokens=6,
        num_drafted_per_pos=[2, 2, 2], num_accepted_per_pos=[2, 2, 2], accepted_per_round=[3, 3],
    )


def trace_c() -> RequestStats:
    # A single-token answer: no TPOT, no gaps, no draft rounds.
    return RequestStats(arrival_time=0.3, num_prompt_tokens=30, emission_times=[0.8], tokens_per_emission=[1])


def test_request_metrics_with_multi_token_emissions():
    m = RequestMetrics.from_stats(trace_a())
    assert m.num_output_tokens == 7 and m.num_emissions == 4
    assert m.ttft_s == approx(0.5) and m.e2e_s == approx(1.1)
    assert m.tpot_s == approx(0.6 / 6)  # (E2E - TTFT) / (N - 1)
    assert m.itl_s == approx((0.2, 0.3, 0.1))
    assert m.tokens_per_emission == approx(7 / 4)
    assert m.acceptance_length == approx(2.0) and m.acceptance_rate == approx(3 / 9)
    assert m.finish_time == 1.1


def test_single_token_request():
    m = RequestMetrics.from_stats(trace_c())
    assert m.tpot_s is None and m.itl_s == () and m.ttft_s == approx(0.5) == m.e2e_s
    assert m.acceptance_length is None and m.acceptance_rate is None


def test_output_token_override_and_inconsistent_stats():
    assert RequestMetrics.from_stats(trace_a(), num_output_tokens=4).tpot_s == approx(0.6 / 3)
    broken = trace_a()
    broken.tokens_per_emission.pop()
    with pytest.raises(ValueError, match="emission times"):
        RequestMetrics.from_stats(broken)


def test_cell_metrics():
    cell = CellMetrics.of([RequestMetrics.from_stats(t()) for t in (trace_a, trace_b, trace_c)])
    assert cell.duration_s == approx(1.5)  # last emission 1.5 - first arrival 0.0
    assert cell.output_throughput == approx(17 / 1.5)
    assert cell.total_throughput == approx((60 + 17) / 1.5)
    assert cell.request_throughput == approx(2.0)
    assert cell.tokens_per_emission == approx(17 / 8)

    assert cell.ttft_s.count == 3
    assert (cell.ttft_s.mean, cell.ttft_s.median, cell.ttft_s.p90) == approx((1.4 / 3, 0.5, 0.5))
    assert cell.ttft_s.std == approx((0.02 / 3 / 3) ** 0.5)  # deviations 1/30, -2/30, 1/30
    assert cell.tpot_s.count == 2 and cell.tpot_s.mean == approx((0.1 + 0.9 / 8) / 2)
    # pooled gaps [0.2, 0.3, 0.1, 0.3, 0.6] -> sorted [0.1, 0.2, 0.3, 0.3, 0.6]
    assert cell.itl_s.count == 5
    assert (cell.itl_s.mean, cell.itl_s.median) == approx((0.3, 0.3))
    assert cell.itl_s.p90 == approx(0.3 + 0.6 * 0.3) and cell.itl_s.p99 == approx(0.3 + 0.96 * 0.3)
    assert cell.e2e_s.mean == approx((1.1 + 1.3 + 0.5) / 3)

    acc = cell.acceptance
    assert (acc.num_draft_rounds, acc.num_draft_tokens, acc.num_accepted_tokens) == (5, 15, 9)
    assert acc.acceptance_rate == approx(0.6)
    assert acc.acceptance_length == approx(2.8)  # 1 + 9 / 5
    assert acc.acceptance_length_per_request == approx(3.0)  # mean(2.0, 4.0); trace_c has no rounds
    assert acc.num_accepted_per_pos == (4, 3, 2)
    assert acc.accept_rate_per_pos == approx((0.8, 0.6, 0.4))
    assert acc.cond_accept_rate_per_pos == approx((4 / 5, 3 / 4, 2 / 3))
    assert acc.accepted_histogram == (1, 1, 1, 2)
    assert acc.is_consistent and acc.acceptance_length_from_positions == approx(1 + 0.8 + 0.6 + 0.4)


def test_inconsistent_per_position_counts_fail_the_check():
    bad = trace_a()
    bad.num_accepted_per_pos = [2, 2, 0]  # sums to 4, but 3 tokens were accepted
    acc = CellMetrics.of([RequestMetrics.from_stats(bad)]).acceptance
    assert not acc.is_consistent
    assert acc.acceptance_length == approx(2.0) and acc.acceptance_length_from_positions == approx(1 + 4 / 3)


def test_no_drafts_cell():
    plain = RequestStats(
        arrival_time=0.0, num_prompt_tokens=5, emission_times=[0.1, 0.2, 0.3], tokens_per_emission=[1, 1, 1]
    )
    cell = CellMetrics.of([RequestMetrics.from_stats(plain)])
    acc = cell.acceptance
    assert acc.acceptance_rate is None and acc.accept_rate_per_pos == () and acc.cond_accept_rate_per_pos == ()
    assert acc.acceptance_length == 1.0 == acc.acceptance_length_per_request and acc.is_consistent
    assert cell.tokens_per_emission == 1.0 and cell.tpot_s.mean == approx(0.1)


def test_explicit_duration_and_empty_cell():
    requests = [RequestMetrics.from_stats(trace_a())]
    assert CellMetrics.of(requests, duration_s=2.0).output_throughput == approx(3.5)
    empty = CellMetrics.of([])
    assert empty.num_requests == 0 and empty.output_throughput is None and empty.ttft_s.mean is None
    assert empty.acceptance.acceptance_length == 1.0
    assert empty.to_row()["output_throughput"] is None


def test_speedup_is_the_output_throughput_ratio():
    spec = CellMetrics.of([RequestMetrics.from_stats(trace_a())], duration_s=1.0)
    base = CellMetrics.of([RequestMetrics.from_stats(trace_a())], duration_s=2.0)
    assert speedup(spec, base) == approx(2.0)
    assert speedup(spec, CellMetrics.of([])) is None


def test_rows_share_one_parquet_schema(tmp_path):
    spec = CellMetrics.of([RequestMetrics.from_stats(t()) for t in (trace_a, trace_b)])
    base = CellMetrics.of([RequestMetrics.from_stats(trace_c())])
    rows = [spec.to_row(num_positions=4), base.to_row(num_positions=4)]
    assert rows[0].keys() == rows[1].keys()
    assert all(not isinstance(v, (list, tuple, dict)) for row in rows for v in row.values())
    assert rows[0]["accept_rate_pos_2"] == approx(3 / 5) and rows[0]["accept_rate_pos_4"] is None
    assert rows[0]["cond_accept_rate_pos_3"] == approx(2 / 3) and rows[1]["accept_rate_pos_1"] is None
    assert rows[0]["itl_s_p99"] == spec.itl_s.p99 and rows[0]["acceptance_length"] == approx(1 + 9 / 5)
    path = tmp_path / "cells.parquet"
    pd.DataFrame(rows).to_parquet(path)
    back = pd.read_parquet(path)
    assert back["acceptance_length"].tolist() == approx([1 + 9 / 5, 1.0])
    assert back["is_acceptance_consistent"].tolist() == [True, True]
