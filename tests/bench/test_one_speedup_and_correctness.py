"""One speedup wherever it is printed (metrics/specs.over_repeats: the geometric mean over repeats), and the
sweep's correctness warning for greedy cells whose outputs differ from k = 0 (issue 40)."""

from __future__ import annotations

import math

import pytest

from specbench.bench.correctness_notes import correctness_lines
from specbench.bench.recommend import _ratio
from specbench.bench.summary_table import format_summary
from specbench.compare.bootstrap import Estimate
from specbench.compare.crossover import speedup_point
from specbench.metrics.specs import over_repeats

# The reported run: per-repeat (k=0, k=3) throughputs whose mean of speedups, ratio of means and geometric mean
# differ (1.077, 1.089, 1.04 in the issue).
BASE = (1.0, 2.0, 4.0)
SPEC = (1.3, 1.9, 4.4)


def _row(repeat: int, k: int, speedup: float | None, **extra) -> dict:
    return {"cell_id": f"r{repeat}-t0-c1-k{k}", "temperature": 0.0, "concurrency": 1, "num_steps": k,
            "speedup": speedup, "accuracy_n": 0, "speedup_bound": None, "baseline_drift": None,
            "is_speedup_implausible": None, "is_drift_suspect": None, **extra}


def test_summary_best_k_and_crossover_print_the_same_speedup():
    speedups = [s / b for s, b in zip(SPEC, BASE)]
    expected = math.exp(sum(map(math.log, speedups)) / 3)
    assert over_repeats(speedups) == pytest.approx(expected)
    assert expected != pytest.approx(sum(speedups) / 3, abs=1e-3)  # not the mean of the speedups ...
    assert expected != pytest.approx(sum(SPEC) / sum(BASE), abs=1e-3)  # ... nor the ratio of the means
    cells = [_row(r, 0, 1.0) for r in range(3)] + [_row(r, 3, s) for r, s in enumerate(speedups)]
    line = next(x for x in format_summary(cells, width=200).splitlines() if x.startswith("Speedup vs k=0"))
    assert line.split()[-1] == f"{expected:.3f}"
    assert speedup_point(1, speedups).speedup == pytest.approx(expected)
    best, runner = (Estimate(sum(v) / 3, None, 30, 3, v) for v in (SPEC, BASE))
    assert _ratio(best, runner) == pytest.approx(expected)
    assert over_repeats([None, math.nan, 0.0]) is None


def test_greedy_outputs_that_differ_from_k0_are_warned_first():
    clean = [_row(0, 0, 1.0, agreement_text=None), _row(0, 3, 1.2, agreement_text=1.0)]
    assert correctness_lines(clean) == []
    sampled = [_row(0, 3, 1.2, agreement_text=0.25, temperature=0.7)]  # sampling: outputs may differ
    assert correctness_lines(sampled) == []
    broken = clean + [_row(0, 5, 1.3, agreement_text=0.25)]
    (line,) = correctness_lines(broken)
    assert line.startswith("WARNING: CORRECTNESS: in 1 of 2 greedy speculative cells the outputs differ from k=0 "
                           "(r0-t0-c1-k5 same text 0.250)")
