"""Throughput, TPOT and TTFT against concurrency: a row per temperature, a line per (run, num-steps); error bars:
the 95% interval of the mean over repeats (runs with --repeats >= 2)."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.axes import Axes

from specbench.compare.plot_data import RunSeries, temperatures
from specbench.compare.plot_style import (
    NamedFigure,
    axes_grid,
    concurrency_axis,
    new_figure,
    no_data,
    run_style,
    shared_legend,
    step_color,
    temperature_title,
)

Panel = tuple[str, float, str]  # (cells column, display scale, y-axis label)


def _lines(ax: Axes, series: Sequence[RunSeries], temperature: float, panel: Panel) -> None:
    column, scale, ylabel = panel
    all_steps = sorted({int(k) for s in series for k in s.cells["num_steps"]})
    concurrencies: set[int] = set()
    for index, run in enumerate(series):
        cells = run.cells[run.cells["temperature"] == temperature]
        for num_steps, group in cells.groupby("num_steps"):
            group = group.dropna(subset=[column]).sort_values("concurrency")
            if group.empty:
                continue
            concurrencies.update(int(c) for c in group["concurrency"])
            ci = group.get(f"{column}_ci")  # 95% interval over repeats; none with one repeat
            yerr = None if ci is None or ci.isna().all() else ci.fillna(0) * scale
            color = step_color(int(num_steps), all_steps)
            ax.plot(group["concurrency"], group[column] * scale, label=f"{run.label} · k={num_steps}",
                    color=color, **run_style(index))
            if yerr is not None:
                ax.errorbar(group["concurrency"], group[column] * scale, yerr=yerr, fmt="none", ecolor=color,
                            capsize=3)
    if not concurrencies:
        no_data(ax, "data")
        return
    concurrency_axis(ax, sorted(concurrencies))
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)


def _figure(series: Sequence[RunSeries], name: str, title: str, panels: Sequence[Panel]) -> NamedFigure:
    temps = temperatures(series)
    figure = new_figure(len(temps), len(panels), title)
    for row, temperature in zip(axes_grid(figure, len(panels)), temps):
        for ax, panel in zip(row, panels):
            _lines(ax, series, temperature, panel)
            ax.set_title(f"{panel[2].split(' (')[0]}, {temperature_title(temperature)}")
    shared_legend(figure)
    return NamedFigure(name, figure)


def throughput_tpot_figure(series: Sequence[RunSeries]) -> NamedFigure:
    panels = (("output_throughput", 1.0, "output throughput (tok/s)"), ("tpot_s_mean", 1e3, "mean TPOT (ms)"))
    return _figure(series, "throughput_tpot_vs_concurrency",
                   "Output throughput and TPOT vs concurrency (one line per run and num-steps k)", panels)


def ttft_figure(series: Sequence[RunSeries]) -> NamedFigure:
    panels = (("ttft_s_mean", 1e3, "mean TTFT (ms)"), ("ttft_s_p99", 1e3, "P99 TTFT (ms)"))
    return _figure(series, "ttft_vs_concurrency", "Time to first token vs concurrency", panels)


def goodput_figure(series: Sequence[RunSeries]) -> NamedFigure | None:
    """Goodput and the share of good requests vs concurrency; None when no run was swept with --goodput."""
    if not any(s.cells["request_goodput"].notna().any() for s in series if "request_goodput" in s.cells):
        return None
    panels = (("request_goodput", 1.0, "goodput (req/s)"), ("good_request_fraction", 100.0, "good requests (%)"))
    return _figure(series, "goodput_vs_concurrency", "Goodput (requests meeting every SLO bound) vs concurrency",
                   panels)
