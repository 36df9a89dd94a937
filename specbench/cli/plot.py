"""`specbench plot RUN [RUN ...]`: PNG figures of one or more runs, overlaid by label."""

from __future__ import annotations

from typing import Annotated

import typer

from specbench.runs.sweep_config import RESULTS_DIR


def plot(
    runs: Annotated[list[str], typer.Argument(help="run directories, or run ids or --labels of runs in "
                                              "--results-dir")],
    out_dir: Annotated[str, typer.Option("--out-dir", "-o", help="directory for the PNGs")] = "plots",
    results_dir: Annotated[str, typer.Option("--results-dir",
                                             help="where run ids and labels are looked up")] = RESULTS_DIR,
) -> None:
    """Throughput/TPOT and TTFT vs concurrency, acceptance length vs num-steps, per-position acceptance,
    speedup heatmap, Pareto (tokens/s per user vs total), speedup vs concurrency, accuracy/agreement."""
    from specbench.compare.loading import load_run
    from specbench.compare.plots import write_plots

    for path in write_plots([load_run(run, results_dir) for run in runs], out_dir):
        print(f"wrote {path}")
