"""metrics/recompute.py: the independent recomputation equals hand-computed values; mismatches and broken invariants
are named."""

from __future__ import annotations

import numpy as np
import pytest

from specbench.metrics.recompute import consistency_columns, recompute


def _request(index, arrival, times, sizes, rounds, drafted, accepted, per_pos, error=None):
    return {"request_index": index, "arrival_time": arrival, "emission_times": times, "tokens_per_emission": sizes,
            "num_output_tokens": sum(sizes), "num_draft_rounds": rounds, "num_draft_tokens": drafted,
            "num_accepted_tokens": accepted, "num_accepted_per_pos": per_pos, "error": error}


# Two requests, k = 2. Request 0: 3 rounds accepting 2, 1, 0 drafts -> A = 3, A_1 = 2, A_2 = 1; emissions 1 (prefill),
# 3, 2, 1 tokens. Request 1: 2 rounds accepting 2, 2 -> A = 4, A_1 = 2, A_2 = 2; emissions 1, 3, 3. A failed one is
# left out (its nonsense counts included).
ROWS = [
    _request(0, 10.0, [10.5, 11.0, 11.5, 12.5], [1, 3, 2, 1], 3, 6, 3, [2, 1]),
    _request(1, 10.2, [10.4, 11.4, 11.6], [1, 3, 3], 2, 4, 4, np.array([2, 2])),
    _request(2, 10.3, [], [], 9, 1, 99, [99, 0], error="timeout"),
]
EXPECTED = {
    "acceptance_length": 1 + 7 / 5,
    "acceptance_rate": 7 / 10,
    "accept_rate_pos_1": 4 / 5,
    "accept_rate_pos_2": 3 / 5,
    "tokens_per_emission": 14 / 7,
    "ttft_s_mean": (0.5 + 0.2) / 2,
    "tpot_s_mean": (2.0 / 6 + 1.2 / 6) / 2,
    "itl_s_mean": (0.5 + 0.5 + 1.0 + 1.0 + 0.2) / 5,
}


def test_recompute_equals_hand_computed_values():
    result = recompute(ROWS, num_positions=2)
    assert result.violations == ()
    assert {name: value for name, (value, _) in result.values.items()} == pytest.approx(EXPECTED)


def test_consistent_cell_and_each_named_mismatch():
    cell = {**EXPECTED, "acceptance_source": "engine"}
    assert consistency_columns(cell, ROWS, 2) == {"is_metrics_consistent": True, "metrics_mismatch": None}
    bug = {**cell, "acceptance_length": 7 / 5, "accept_rate_pos_1": 3 / 5, "accept_rate_pos_2": None}
    out = consistency_columns(bug, ROWS, 2)
    assert out["is_metrics_consistent"] is False
    assert "acceptance_length 1.4 vs recomputed 2.4" in out["metrics_mismatch"]
    assert "accept_rate_pos_1 0.6 vs recomputed 0.8" in out["metrics_mismatch"]
    assert "accept_rate_pos_2 null vs recomputed 0.6" in out["metrics_mismatch"]
    # Times get a relative tolerance of 1e-6, counts 1e-9.
    assert consistency_columns({**cell, "ttft_s_mean": cell["ttft_s_mean"] * (1 + 1e-8)}, ROWS, 2)[
        "is_metrics_consistent"]
    assert not consistency_columns({**cell, "tokens_per_emission": 2 * (1 + 1e-7)}, ROWS, 2)["is_metrics_consistent"]


def test_server_metrics_acceptance_is_not_checked_and_no_request_checks_nothing():
    cell = {**EXPECTED, "acceptance_source": "server:vllm", "acceptance_length": 3.0, "acceptance_rate": 0.9}
    assert consistency_columns(cell, ROWS, 2)["is_metrics_consistent"] is True
    assert consistency_columns(cell, ROWS[2:], 2) == {"is_metrics_consistent": None, "metrics_mismatch": None}


@pytest.mark.parametrize("change, message", [
    ({"num_accepted_per_pos": [1, 1]}, "sum_k A_k 2 != A 3"),
    ({"num_accepted_per_pos": [1, 2], "num_accepted_tokens": 3}, "A_k increases with k"),
    ({"num_draft_tokens": 2}, "accepted 3 > proposed 2"),
    ({"num_output_tokens": 8}, "tokens per emission sum 7 != output tokens 8"),
    ({"emission_times": [10.5, 11.5, 11.0, 12.5]}, "emission times decrease"),
    ({"arrival_time": 10.6}, "TTFT"),
])
def test_broken_invariants_are_named(change, message):
    rows = [{**ROWS[0], **change}, ROWS[1]]
    out = consistency_columns({"acceptance_source": "engine"}, rows, 2)
    assert out["is_metrics_consistent"] is False and message in out["metrics_mismatch"]


def test_response_counts_without_proposed_tokens_or_positions_check_what_they_allow():
    rows = [{**r, "num_draft_tokens": None, "num_accepted_per_pos": None} for r in ROWS[:2]]
    names = {name for name in recompute(rows, 2).values}
    assert "acceptance_length" in names and not names & {"acceptance_rate", "accept_rate_pos_1"}
    cell = {**EXPECTED, "acceptance_source": "response", "acceptance_rate": None, "accept_rate_pos_1": None}
    assert consistency_columns(cell, rows, 2)["is_metrics_consistent"] is True
    out = consistency_columns({**cell, "acceptance_length": 2.5}, rows, 2)
    assert out["metrics_mismatch"] == "acceptance_length 2.5 vs recomputed 2.4"


def test_is_acceptance_consistent_false_makes_the_cell_inconsistent():
    cell = {**EXPECTED, "acceptance_source": "engine", "acceptance_length_from_positions": 2.3,
            "is_acceptance_consistent": False}
    out = consistency_columns(cell, ROWS, 2)
    assert out["is_metrics_consistent"] is False
    assert "acceptance_length 2.4 != 1 + sum_k p_k 2.3" in out["metrics_mismatch"]
    assert consistency_columns({**cell, "is_acceptance_consistent": True}, ROWS, 2)["is_metrics_consistent"] is True


# The steps of ROWS' rounds (k = 2): request 0 drafted 2 per round, request 1 too; accepted 2, 1, 0 and 2, 2.
STEPS = [{"step": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0},
         {"step": 1, "num_draft_tokens": 4, "num_accepted_tokens": 4},
         {"step": 2, "num_draft_tokens": 4, "num_accepted_tokens": 3},
         {"step": 3, "num_draft_tokens": 2, "num_accepted_tokens": 0}]


def test_step_totals_and_emission_sizes_cross_check_the_counters():
    from specbench.metrics.recompute import emission_violations, step_total_violations

    assert step_total_violations(ROWS, STEPS) == () and emission_violations(ROWS, 2) == []
    # one more accepted draft recorded in a round that rejected one: counters still consistent with each other
    off = [{**ROWS[0], "num_accepted_tokens": 4, "num_accepted_per_pos": [2, 2]}, ROWS[1], ROWS[2]]
    assert recompute(off, 2).violations == ()
    assert "num_accepted_tokens: steps total 7 != requests total 8" in step_total_violations(off, STEPS)
    cell = {**EXPECTED, "acceptance_source": "engine", "acceptance_length": 1 + 8 / 5, "acceptance_rate": 8 / 10,
            "accept_rate_pos_2": 4 / 5}
    assert consistency_columns({**cell, "acceptance_source": "response"}, off, 2)["is_metrics_consistent"] is True
    # an engine's own records: its emissions carried 3 accepted drafts, not 4 (+ up to k = 2 cut by a stop is fine)
    assert consistency_columns(cell, off, 2)["is_metrics_consistent"] is True
    assert "request 0: accepted 4 vs 0 carried" in consistency_columns(
        cell, [{**off[0], "tokens_per_emission": [1, 1, 1, 1], "num_output_tokens": 4}, ROWS[1]], 2)["metrics_mismatch"]
    low = [{**ROWS[0], "num_accepted_tokens": 2, "num_accepted_per_pos": [1, 1]}, ROWS[1]]
    assert any("request 0: accepted 2 vs 3 carried" in p for p in emission_violations(low, 2))
