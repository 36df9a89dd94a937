"""Acceptance length vs num-steps, per-position acceptance bars, and the speedup heatmap (concurrency x num-steps)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.colors import TwoSlopeNorm
from matplotlib.patches import Rectangle

from specbench.compare.plot_data import MIN_INTERVAL_SAMPLES, RunSeries, temperatures
from specbench.compare.plot_style import (
    NamedFigure,
    add_note,
    axes_grid,
    bounded_yerr,
    new_figure,
    no_data,
    run_color,
    shared_legend,
    temperature_title,
)
from specbench.runs.speedup_flags import DRIFT_MARK, IMPLAUSIBLE_MARK

FLAG_NOTE = (f"{IMPLAUSIBLE_MARK} above what its acceptance allows, {DRIFT_MARK} within the baseline drift: the sweep "
             "cannot vouch for these speedups")
POOLED_NOTE = f"no interval where fewer than {MIN_INTERVAL_SAMPLES} cells are pooled"


def acceptance_length_figure(series: Sequence[RunSeries]) -> NamedFigure:
    """AL = 1 + A / D pooled over concurrency; k = 0 is 1 by definition; dashed: the k + 1 ceiling; error bars:
    95% intervals over the pooled cells (plot_data.RunSeries.acceptance), kept inside [1, k + 1]."""
    temps = temperatures(series)
    figure = new_figure(1, len(temps), "Acceptance length vs num-steps (pooled over concurrency)")
    missing = False
    for ax, temperature in zip(figure.axes, temps):
        max_k = 0
        for index, run in enumerate(series):
            acc = run.acceptance[run.acceptance["temperature"] == temperature].sort_values("num_steps")
            if acc.empty:
                continue
            steps = [0, *acc["num_steps"]]
            max_k = max(max_k, steps[-1])
            ax.plot(steps, [1.0, *acc["acceptance_length"]], label=run.label, color=run_color(index), marker="o")
            missing |= bool(acc["acceptance_length_ci"].isna().any())
            for k, value, half in zip(acc["num_steps"], acc["acceptance_length"], acc["acceptance_length_ci"]):
                yerr = bounded_yerr([value], [half], 1.0, k + 1.0)
                if yerr is not None:
                    ax.errorbar([k], [value], yerr=yerr, fmt="none", ecolor=run_color(index), capsize=3)
        if not max_k:
            no_data(ax, "speculative cells")
            continue
        ax.plot([0, max_k], [1, max_k + 1], color="0.6", linestyle="--", linewidth=1, label="ceiling (k + 1)")
        ax.set_xticks(range(max_k + 1))
        ax.set(xlabel="num-steps k (draft tokens per round)", ylabel="acceptance length (tokens per round)",
               title=temperature_title(temperature))
        ax.set_ylim(bottom=0.9)
        ax.grid(True, alpha=0.3)
    shared_legend(figure)
    add_note(figure, POOLED_NOTE if missing else "")
    return NamedFigure("acceptance_length_vs_num_steps", figure)


def per_position_figure(series: Sequence[RunSeries]) -> NamedFigure:
    """p_k = A_k / D at each run's largest num-steps, bars grouped by position; error bars: 95% intervals over the
    pooled cells, kept inside [0, 100] %."""
    temps = temperatures(series)
    figure = new_figure(1, len(temps), "Per-position acceptance p_k at the largest num-steps")
    width = 0.8 / max(1, len(series))
    missing = False
    for ax, temperature in zip(figure.axes, temps):
        drawn = 0
        for index, run in enumerate(series):
            acc = run.acceptance[run.acceptance["temperature"] == temperature]
            if acc.empty:
                continue
            top = acc.loc[acc["num_steps"].idxmax()]
            k = int(top["num_steps"])
            rates = [100 * top[f"accept_rate_pos_{i}"] for i in range(1, k + 1)]
            halves = [100 * top[f"accept_rate_pos_{i}_ci"] for i in range(1, k + 1)]
            missing |= bool(np.isnan(halves).any())
            positions = np.arange(1, k + 1) + (index - (len(series) - 1) / 2) * width
            bars = ax.bar(positions, rates, width=width, yerr=bounded_yerr(rates, halves, 0.0, 100.0), capsize=3,
                          label=f"{run.label} (k={k})", color=run_color(index))
            ax.bar_label(bars, fmt="%.0f", fontsize=8, padding=2)
            drawn = max(drawn, k)
        if not drawn:
            no_data(ax, "speculative cells")
            continue
        ax.set_xticks(range(1, drawn + 1))
        ax.set(xlabel="draft position k", ylabel="rounds accepting position k (%)",
               title=temperature_title(temperature))
        ax.set_ylim(0, 112)  # room for the labels over 100 % bars
        ax.grid(True, axis="y", alpha=0.3)
    shared_legend(figure)
    add_note(figure, POOLED_NOTE if missing else "")
    return NamedFigure("acceptance_per_position", figure)


def speedup_figure(series: Sequence[RunSeries]) -> NamedFigure | None:
    """Output-throughput speedup over the k = 0 cell, each cell marked with the sweep's flags (runs/speedup_flags.py:
    hatched, the mark after the value) and the title saying what they mean; None when no run has a baseline
    (--no-speedup)."""
    temps = temperatures(series)
    has = [run for run in series if run.cells["speedup"].notna().any() and (run.cells["num_steps"] > 0).any()]
    if not has:
        return None
    values = np.concatenate([run.cells.loc[run.cells["num_steps"] > 0, "speedup"].dropna().to_numpy() for run in has])
    spread = max(abs(values.max() - 1), abs(values.min() - 1), 0.05)
    norm = TwoSlopeNorm(vcenter=1.0, vmin=1 - spread, vmax=1 + spread)
    figure = new_figure(len(has), len(temps), "Speedup vs k=0 (output throughput ratio; green > 1 > red)",
                        panel_size=(4.6, 3.4))
    image = None
    flagged = False
    for row, run in zip(axes_grid(figure, len(temps)), has):
        for ax, temperature in zip(row, temps):
            cells = run.cells[(run.cells["temperature"] == temperature) & (run.cells["num_steps"] > 0)]
            grid = cells.pivot_table(index="concurrency", columns="num_steps", values="speedup")
            if grid.empty:
                no_data(ax, "speedup")
                continue
            marks = cells.pivot_table(index="concurrency", columns="num_steps", values="speedup_flag",
                                      aggfunc="first").reindex_like(grid).fillna("")
            image = ax.imshow(grid.to_numpy(), cmap="RdYlGn", norm=norm, aspect="auto", origin="lower")
            for (i, j), value in np.ndenumerate(grid.to_numpy()):
                mark = marks.iat[i, j]
                if mark:
                    flagged = True
                    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", edgecolor="0.2",
                                           linewidth=0))
                dark = not np.isnan(value) and abs(float(norm(value)) - 0.5) > 0.35  # white text on deep colours
                text = "-" if np.isnan(value) else f"{value:.2f}x" + (f"\n{mark}" if mark else "")
                ax.text(j, i, text, ha="center", va="center", fontsize=10, color="white" if dark else "black",
                        fontweight="bold" if mark else "normal")
            ax.set_xticks(range(grid.shape[1]), [str(k) for k in grid.columns])
            ax.set_yticks(range(grid.shape[0]), [str(c) for c in grid.index])
            ax.set(xlabel="num-steps k", ylabel="concurrency", title=f"{run.label}, {temperature_title(temperature)}")
    if image is not None:
        figure.colorbar(image, ax=figure.axes, label="speedup (x)", shrink=0.8)
    add_note(figure, FLAG_NOTE if flagged else "")
    return NamedFigure("speedup_heatmap", figure)
