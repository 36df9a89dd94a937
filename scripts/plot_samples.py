"""Redraw docs/plots/: every plot kind from the fixture runs of tests/support/compare_fixtures.py (plot_fixture_runs) (3 repeats),
and the throughput figure from 2 repeats (no intervals, and its title says why).

    PYTHONPATH=. python scripts/plot_samples.py [docs/plots]
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path

from specbench.compare.plot_style import save_figures
from specbench.compare.plots import plot_runs
from tests.support.compare_fixtures import plot_fixture_runs


def main(out_dir: str = "docs/plots") -> None:
    with tempfile.TemporaryDirectory() as tmp:
        figures = plot_runs(plot_fixture_runs(Path(tmp) / "three", repeats=3))
        figures += [dataclasses.replace(f, name=f"{f.name}_2_repeats")
                    for f in plot_runs(plot_fixture_runs(Path(tmp) / "two", repeats=2))
                    if f.name == "throughput_tpot_vs_concurrency"]
        for path in save_figures(figures, out_dir):
            print(path)


if __name__ == "__main__":
    main(*sys.argv[1:])
