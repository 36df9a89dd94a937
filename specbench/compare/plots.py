"""Every figure for a set of runs (overlaid by label), as Figures to inspect or save as PNGs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specbench.compare.loading import Run
from specbench.compare.plot_data import run_series
from specbench.compare.plot_style import NamedFigure, fit_titles, save_figures
from specbench.compare.plots_acceptance import acceptance_length_figure, per_position_figure, speedup_figure
from specbench.compare.plots_accuracy import accuracy_figure
from specbench.compare.plots_latency import goodput_figure, throughput_tpot_figure, ttft_figure
from specbench.compare.plots_pareto import pareto_figure, speedup_concurrency_figure
from specbench.errors import SpecbenchError
from specbench.workloads import SPEED_ONLY_WORKLOADS


def plot_runs(runs: Sequence[Run]) -> list[NamedFigure]:
    """throughput/TPOT and TTFT vs concurrency, goodput (runs swept with --goodput), acceptance length vs k,
    per-position acceptance, the speedup heatmap (when the runs have k = 0 baselines), the Pareto front (tokens/s
    per user vs total), speedup vs concurrency with its crossover (speedups at >= 2 concurrencies) and
    accuracy/agreement (not for speed-only workloads)."""
    if not runs:
        raise SpecbenchError("plot needs at least one run")
    series = run_series(runs)
    figures = [throughput_tpot_figure(series), ttft_figure(series)]
    goodput = goodput_figure(series)
    figures += [goodput] if goodput is not None else []
    if any(not s.acceptance.empty for s in series):
        figures += [acceptance_length_figure(series), per_position_figure(series)]
    speedup = speedup_figure(series)
    figures += [speedup] if speedup is not None else []
    figures.append(pareto_figure(series))
    by_concurrency = speedup_concurrency_figure(runs, [s.label for s in series])
    figures += [by_concurrency] if by_concurrency is not None else []
    if not all(run.info.workload in SPEED_ONLY_WORKLOADS for run in runs):
        figures.append(accuracy_figure(series))
    mark_engine_notes(figures, runs)
    for named in figures:
        fit_titles(named.figure)
    return figures


def mark_engine_notes(figures: Sequence[NamedFigure], runs: Sequence[Run]) -> None:
    """A mutant (or synthetic-acceptance) run is no measurement of the real engine: every title says so."""
    notes = sorted({run.info.engine_note for run in runs if run.info.engine_note})
    for named in figures if notes else ():
        title, newline, note = named.figure.get_suptitle().partition("\n")  # the mark on the title's own line
        named.figure.suptitle(f"{title}, includes {' '.join(notes)}{newline}{note}", fontsize=13)


def write_plots(runs: Sequence[Run], out_dir: str | Path) -> list[Path]:
    try:
        return save_figures(plot_runs(runs), out_dir)
    except OSError as err:
        raise SpecbenchError(f"cannot write figures to {out_dir}: {err.strerror or err}") from None
