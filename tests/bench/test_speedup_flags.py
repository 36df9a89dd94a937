"""Speedups the summary cannot vouch for: above the acceptance bound, or within the measured baseline drift."""

from __future__ import annotations

import math

import pytest

from specbench.bench.drift import DRIFT_TOLERANCE, drift_columns, drift_fraction, is_drift_suspect, is_probed
from specbench.bench.flag_notes import flag_lines, num_flagged
from specbench.runs.speedup_flags import DRIFT_MARK, IMPLAUSIBLE_MARK
from specbench.bench.speedup_bound import (
    SPEEDUP_BOUND_TOLERANCE,
    bound_columns,
    draft_share,
    is_speedup_implausible,
    speedup_bound,
)
from specbench.bench.summary_table import format_summary
from specbench.config import EngineConfig
from specbench.runs.sweep_config import SweepConfig


def _step(phase: str, step_ms: float, draft_ms: float) -> dict:
    return {"phase": phase, "step_ms": step_ms, "draft_ms": draft_ms}


def _cell(k: int, speedup: float | None, al: float | None, **extra) -> dict:
    return {"cell_id": f"r0-t0-c1-k{k}", "num_steps": k, "speedup": speedup, "acceptance_length": al,
            "tokens_per_emission": al or 1.0, "backend": "embedded", **extra}


def test_issue_row_is_implausible_and_a_plausible_one_passes():
    assert speedup_bound(1.75) == 1.75
    assert is_speedup_implausible(4.959, speedup_bound(1.75)) is True
    assert is_speedup_implausible(1.6, speedup_bound(1.75)) is False
    # the tolerance is the edge: just inside passes, just outside fails
    edge = 1.75 * (1 + SPEEDUP_BOUND_TOLERANCE)
    assert is_speedup_implausible(edge * 0.999, 1.75) is False and is_speedup_implausible(edge * 1.001, 1.75)
    assert is_speedup_implausible(None, 1.75) is None and is_speedup_implausible(2.0, None) is None
    assert speedup_bound(None) is None and speedup_bound(math.nan) is None


def test_step_timings_tighten_the_bound():
    # decode steps spend a quarter of their time drafting: a plain step is at most 3/4 of a verify round
    steps = [_step("decode", 8.0, 2.0), _step("decode", 4.0, 1.0), _step("prefill", 100.0, 0.0)]
    assert draft_share(steps) == pytest.approx(0.25)
    columns = bound_columns(_cell(3, 1.6, 2.0), steps)
    assert columns["speedup_bound"] == pytest.approx(1.5)
    assert columns["is_speedup_implausible"] is False  # 1.6 <= 1.5 x 1.15
    assert bound_columns(_cell(3, 1.8, 2.0), steps)["is_speedup_implausible"] is True
    assert bound_columns(_cell(3, 1.8, 2.0), [])["is_speedup_implausible"] is False  # loose bound: AL
    assert draft_share([_step("prefill", 5.0, 0.0)]) is None


def test_bound_columns_are_null_for_the_baseline_and_without_acceptance():
    assert bound_columns(_cell(0, 1.0, 1.0), []) == {"speedup_bound": None, "is_speedup_implausible": None}
    assert bound_columns(_cell(3, None, 1.5), [])["is_speedup_implausible"] is None
    http = {**_cell(3, 2.0, None), "backend": "openai", "tokens_per_emission": 5.0}
    assert bound_columns(http, []) == {"speedup_bound": None, "is_speedup_implausible": None}
    # embedded without a single draft round: every round emitted one token, so the bound is 1
    assert bound_columns({**_cell(3, 3.0, None), "tokens_per_emission": 1.0}, [])["is_speedup_implausible"]


def _probe_series(start: float, drift_per_probe: float, n: int) -> list[float]:
    """Synthetic probe throughputs: a start value times a per-probe drift factor."""
    return [start * (1 + drift_per_probe) ** i for i in range(n)]


def test_drift_flag_fires_on_injected_drift_and_not_on_flat_timings():
    flat = _probe_series(100.0, 0.0, 2)
    drifting = _probe_series(100.0, -0.4, 2)  # the machine got 40% slower between the group's probes
    assert drift_fraction(*flat) == 0.0 and drift_fraction(*drifting) == pytest.approx(-0.4)
    for speedup in (0.7, 1.0, 1.3, 1.6):  # all within a factor 1/0.6 of 1: drift could make them
        assert is_drift_suspect(speedup, drift_fraction(*drifting)) is True
        assert is_drift_suspect(speedup, drift_fraction(*flat)) is False
    assert is_drift_suspect(2.5, drift_fraction(*drifting)) is False  # beyond what the drift explains
    assert is_drift_suspect(1.0, DRIFT_TOLERANCE * 0.9) is False  # noise band
    assert is_drift_suspect(1.0, None) is None and is_drift_suspect(None, 0.5) is None
    assert drift_fraction(0.0, 10.0) is None and drift_fraction(None, 10.0) is None
    assert drift_columns(_cell(0, 1.0, 1.0), -0.4) == {"baseline_drift": -0.4, "is_drift_suspect": None}
    assert drift_columns(_cell(2, 1.2, 1.5), -0.4) == {"baseline_drift": -0.4, "is_drift_suspect": True}


def _summary_row(k: int, speedup: float, **flags) -> dict:
    row = {"cell_id": f"r0-t0-c1-k{k}", "temperature": 0.0, "concurrency": 1, "num_steps": k, "speedup": speedup,
           "accuracy_n": 0, "speedup_bound": None, "baseline_drift": None, "is_speedup_implausible": None,
           "is_drift_suspect": None}
    return {**row, **flags}


def test_summary_marks_flagged_speedups_and_counts_them():
    cells = [
        _summary_row(0, 1.0, baseline_drift=-0.4),
        _summary_row(3, 4.959, speedup_bound=1.75, is_speedup_implausible=True, baseline_drift=-0.4,
                     is_drift_suspect=False),
        _summary_row(5, 1.2, speedup_bound=2.0, is_speedup_implausible=False, baseline_drift=-0.4,
                     is_drift_suspect=True),
    ]
    table = format_summary(cells, width=200)
    speedup_line = next(line for line in table.splitlines() if line.startswith("Speedup vs k=0"))
    assert speedup_line.split()[3:] == ["1.000", "4.959", IMPLAUSIBLE_MARK, "1.200", DRIFT_MARK]
    assert num_flagged(cells) == 2
    lines = flag_lines(cells, SweepConfig())
    assert lines[0].startswith("WARNING: 1 of 2 speedups exceed")
    assert "r0-t0-c1-k3 speedup 4.959 > bound 1.750" in lines[0]
    assert lines[1].startswith("WARNING: 1 of 2 speedups lie within the baseline drift")
    assert lines[2].startswith("WARNING: baseline drift") and "-40%" in lines[2]


def test_a_clean_run_prints_no_warning_and_server_cmd_runs_say_they_were_not_interleaved():
    cells = [_summary_row(0, 1.0, baseline_drift=0.02),
             _summary_row(3, 1.4, speedup_bound=1.8, is_speedup_implausible=False, baseline_drift=0.02,
                          is_drift_suspect=False)]
    assert num_flagged(cells) == 0
    assert [line.split(":")[0] for line in flag_lines(cells, SweepConfig())] == ["note"]
    speedup_line = next(line for line in format_summary(cells, width=200).splitlines() if "Speedup" in line)
    assert speedup_line.split()[3:] == ["1.000", "1.400"]
    launched = SweepConfig(backend="openai", server_cmd="preset:vllm", num_steps=(3,))
    no_drift = [{**row, "baseline_drift": None} for row in cells]
    assert flag_lines(no_drift, launched)[-1].startswith("note: --server-cmd launches one server per k")


def test_probes_need_k0_on_demand():
    ngram = EngineConfig(method="ngram")
    assert is_probed(SweepConfig(num_steps=(3,), engine=ngram))  # the embedded engine adds k = 0
    assert not is_probed(SweepConfig(num_steps=(3,), engine=ngram, speedup=False))
    assert not is_probed(SweepConfig(num_steps=(0, 3), engine=ngram, backend="openai", server_cmd="preset:vllm"))
    assert not is_probed(SweepConfig(num_steps=(3,), engine=ngram, backend="openai", base_url="http://x"))
