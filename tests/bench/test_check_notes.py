"""The summary's lines for the per-cell checks (bench/check_notes.py)."""

from __future__ import annotations

from specbench.bench.check_notes import drift_lines, histogram_lines, loop_lines


def _cell(**overrides) -> dict:
    row = {"cell_id": "r0-t0-c1-k2", "temperature": 0.0, "concurrency": 1, "num_steps": 2,
           "acceptance_length": 2.4, "acceptance_length_histogram": [0, 1, 0, 2, 0, 0, 0, 5],
           "acceptance_length_request_p10": 1.3, "acceptance_length_request_p50": 2.6,
           "acceptance_length_request_p90": 3.0, "num_loop_requests": 0, "loop_request_fraction": 0.0,
           "acceptance_length_without_loops": 2.4, "is_acceptance_loop_inflated": False,
           "acceptance_windows": None, "acceptance_drift": None, "acceptance_drift_p": None,
           "is_acceptance_drift": None}
    row.update(overrides)
    return row


def test_histogram_line_sums_repeats():
    lines = histogram_lines([_cell(), _cell(cell_id="r1-t0-c1-k2"), _cell(num_steps=0, concurrency=2,
                                                                          acceptance_length_histogram=None)])
    assert len(lines) == 2
    assert lines[1] == "  t=0 c=1 k=2: 1 | ▂ ▄   █| 3  (16 requests; p10 1.30, p50 2.60, p90 3.00)"


def test_loop_warning_names_the_inflated_cell():
    inflated = _cell(num_loop_requests=3, loop_request_fraction=0.3, acceptance_length_without_loops=1.8,
                     is_acceptance_loop_inflated=True)
    (line,) = loop_lines([inflated, _cell()])
    assert line.startswith("WARNING: acceptance inflated by degenerate output loops in 1 of 2 cells")
    assert "r0-t0-c1-k2 AL 2.40 vs 1.80 without its 3 looping requests (30%)" in line
    (note,) = loop_lines([_cell(num_loop_requests=1, loop_request_fraction=0.1)])
    assert note.startswith("note: 1 requests ended in a degenerate loop")
    assert loop_lines([_cell()]) == []


def test_drift_warning_and_stable_note():
    windows = [3.4, 3.3, 3.1, None, 2.8, 2.5, 2.3, 2.2, 2.1, 2.0, 1.9, 1.9]
    drifting = _cell(acceptance_windows=windows, acceptance_drift=-0.44, acceptance_drift_p=1e-4,
                     is_acceptance_drift=True)
    (line,) = drift_lines([drifting, _cell(is_acceptance_drift=False)])
    assert line.startswith("WARNING: acceptance drifts over time in 1 of 2 --duration cells")
    assert "r0-t0-c1-k2 3.40 -> 1.90 tokens/emission (-44%, p=0.0001)" in line
    assert drift_lines([_cell(is_acceptance_drift=False)])[0].startswith("note: acceptance stable")
    assert drift_lines([_cell()]) == []


def test_prefix_cache_lines_compare_speculation_on_and_off():
    from specbench.bench.check_notes import prefix_cache_lines

    def cell(k, rate):
        return _cell(num_steps=k, prefix_cache_hit_rate=rate, prefix_cache_source="sglang:cache_hit_rate (gauge "
                     "at window end)")

    lines = prefix_cache_lines([cell(0, 0.97), cell(2, 0.45), cell(2, 0.53)])
    assert lines[0] == "WARNING: speculation lowers the server's prefix-cache hit rate by > 10% points: t=0 c=1 k=2 " \
                       "49% vs k=0 97%"
    assert lines[-1] == "  t=0 c=1: k=0 97%, k=2 49%"
    assert not prefix_cache_lines([cell(0, 0.97), cell(2, 0.95)])[0].startswith("WARNING")
    assert prefix_cache_lines([_cell(prefix_cache_hit_rate=None)]) == []
