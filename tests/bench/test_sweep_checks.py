"""The per-cell checks (bench/sweep_checks.py, bench/acceptance_drift.py, metrics/request_acceptance.py) on
synthetic request rows."""

from __future__ import annotations

import numpy as np
import pytest

from specbench.bench.acceptance_drift import acceptance_windows, drift_test_columns, mann_kendall, sen_slope
from specbench.bench.sweep_checks import check_columns
from specbench.metrics.request_acceptance import acceptance_histogram, acceptance_quantiles, sparkline


def _row(accepted: list[int], is_loop: bool | None = False, start: float = 0.0, step: float = 0.01) -> dict:
    tokens = [1] + [a + 1 for a in accepted]
    return {"error": None, "num_draft_rounds": len(accepted), "num_accepted_tokens": sum(accepted),
            "is_degenerate_loop": is_loop, "emission_times": [start + step * i for i in range(len(tokens))],
            "tokens_per_emission": tokens}


def test_histogram_bins_and_quantiles():
    assert acceptance_histogram([1.0, 1.2, 2.0, 3.0, 2.99], num_steps=2) == [2, 0, 0, 0, 1, 0, 0, 2]
    assert acceptance_histogram([0.5, 9.0], num_steps=4) == [1, 0, 0, 0, 0, 0, 0, 1]  # clipped into the ends
    assert acceptance_quantiles([1.0, 2.0, 3.0]) == (1.2, 2.0, 2.8)
    assert sparkline([0, 1, 4, 8]) == " ▁▄█"
    with pytest.raises(ValueError):
        acceptance_histogram([1.0], 0)


def test_loops_that_inflate_acceptance_are_flagged():
    clean = [_row([1, 0, 1, 0]) for _ in range(8)]  # AL 1.5
    loops = [_row([3, 3, 3, 3], is_loop=True) for _ in range(2)]  # AL 4
    row = check_columns(clean + loops, num_steps=3, duration_limit_s=None)
    assert row["num_loop_requests"] == 2 and row["loop_request_fraction"] == 0.2
    assert row["acceptance_length_without_loops"] == 1.5
    assert row["loop_acceptance_inflation"] == pytest.approx((1 + 40 / 40) / 1.5 - 1)
    assert row["is_acceptance_loop_inflated"] is True
    assert row["acceptance_length_histogram"] == [0, 8, 0, 0, 0, 0, 0, 2]  # bins of 3/8 over [1, 4]
    # Loops accepting like the rest do not inflate anything.
    tame = check_columns(clean + [_row([1, 0, 1, 0], is_loop=True)], num_steps=3, duration_limit_s=None)
    assert tame["num_loop_requests"] == 1 and tame["is_acceptance_loop_inflated"] is False
    # No loops, k = 0, unknown per-request counts.
    assert check_columns(clean, 3, None)["is_acceptance_loop_inflated"] is False
    assert check_columns(clean, 0, None)["acceptance_length_histogram"] is None
    http = [{**r, "num_draft_rounds": None, "num_accepted_tokens": None} for r in clean]
    assert check_columns(http, 3, None)["is_acceptance_loop_inflated"] is None


def test_windows_pool_decode_emissions_in_time_order():
    rows = [_row([2] * 10, start=0.0), _row([0] * 10, start=0.1)]  # first 3 tok/emission, later 1
    windows = acceptance_windows(rows, num_windows=4)
    assert windows[0] == 3.0 and windows[-1] == 1.0
    assert acceptance_windows([_row([])]) == []


def test_mann_kendall_and_sen_slope():
    s, p = mann_kendall(list(range(12)))
    assert s == 66 and p < 1e-4
    assert mann_kendall([2.0] * 12) == (0.0, 1.0)
    assert sen_slope([0.0, 2.0, 4.0, 6.0, 8.0, 100.0]) == 2.0  # robust to the outlier


def test_drift_is_flagged_for_a_decaying_duration_run_only():
    rng = np.random.default_rng(0)
    decaying = list(3.4 - 1.5 * np.linspace(0, 1, 12) + rng.normal(0, 0.05, 12))  # 3.4 -> 1.9
    row = drift_test_columns(decaying, is_tested=True)
    assert row["is_acceptance_drift"] is True and row["acceptance_drift"] < -0.3
    flat = list(2.5 + rng.normal(0, 0.05, 12))
    assert drift_test_columns(flat, is_tested=True)["is_acceptance_drift"] is False
    assert drift_test_columns(decaying, is_tested=False)["is_acceptance_drift"] is None
    assert drift_test_columns(decaying[:5] + [None] * 7, is_tested=True)["is_acceptance_drift"] is None
    tiny = list(2.5 - 0.05 * np.linspace(0, 1, 12))  # monotone but 2%: below the tolerance
    assert drift_test_columns(tiny, is_tested=True)["is_acceptance_drift"] is False


def test_a_decaying_duration_cell_is_flagged_from_its_request_rows():
    """Acceptance 3.4 -> 1.9 tokens per emission over the window (SGLang #28771's shape), requests interleaved."""
    rows = []
    for i in range(24):
        start = i * 0.5
        accepted = 2 if i < 8 else 1 if i < 16 else 0  # later requests accept less
        rows.append(_row([accepted] * 20, start=start, step=0.02))
    drifting = check_columns(rows, num_steps=3, duration_limit_s=12.0)
    assert drifting["is_acceptance_drift"] is True and drifting["acceptance_drift"] < -0.3
    assert drifting["acceptance_windows"][0] == 3.0 and drifting["acceptance_windows"][-1] == 1.0
    assert check_columns(rows, num_steps=3, duration_limit_s=None)["is_acceptance_drift"] is None  # no --duration
    steady = [_row([1] * 20, start=i * 0.5, step=0.02) for i in range(24)]
    assert check_columns(steady, num_steps=3, duration_limit_s=12.0)["is_acceptance_drift"] is False
