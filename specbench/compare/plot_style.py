"""Shared look of the figures: one colour per num-steps, one line style per run, readable sizes, Agg only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import textwrap

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.axes import Axes
from matplotlib.figure import Figure  # pyplot-free: no GUI backend or global state; savefig renders with Agg

from specbench.compare.matching import format_temperature

LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P")
RC = {"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 8, "figure.dpi": 100}


@dataclass(frozen=True)
class NamedFigure:
    name: str  # file stem, e.g. "throughput_tpot_vs_concurrency"
    figure: Figure


def new_figure(num_rows: int, num_cols: int, title: str, panel_size: tuple[float, float] = (5.0, 3.6)) -> Figure:
    with matplotlib.rc_context(RC):
        figure = Figure(figsize=(panel_size[0] * num_cols, panel_size[1] * num_rows + 0.6), layout="constrained")
        figure.subplots(num_rows, num_cols, squeeze=False)
        figure.suptitle(title, fontsize=13)
    return figure


def axes_grid(figure: Figure, num_cols: int) -> list[list[Axes]]:
    flat = figure.axes
    return [flat[i : i + num_cols] for i in range(0, len(flat), num_cols)]


def run_style(index: int) -> dict:
    return {"linestyle": LINE_STYLES[index % len(LINE_STYLES)], "marker": MARKERS[index % len(MARKERS)]}


def step_color(num_steps: int, all_steps: Sequence[int]) -> str:
    return f"C{sorted(all_steps).index(num_steps) % 10}"


def temperature_title(temperature: float) -> str:
    return f"temperature {format_temperature(temperature)}"


def concurrency_axis(ax: Axes, values: Sequence[int]) -> None:
    values = sorted(set(values))
    if values and values[-1] / max(values[0], 1) >= 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(values, [str(v) for v in values])
    ax.set_xlabel("concurrency (requests in flight)")
    ax.grid(True, alpha=0.3)


def shared_legend(figure: Figure) -> None:
    """One legend for the whole figure, below the panels (per-panel legends hide data)."""
    seen: dict[str, object] = {}
    for ax in figure.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        figure.legend(list(seen.values()), list(seen), loc="outside lower center", ncols=min(len(seen), 6),
                      fontsize=9, frameon=False)


def no_data(ax: Axes, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def fit_titles(figure: Figure) -> None:
    """Wrap the figure title and every panel title that is wider than its room (the figure, or its panel), so
    none is cut at the edge of the PNG; layout is recomputed around the wrapped lines."""
    canvas = FigureCanvasAgg(figure)
    for _ in range(3):  # wrapping changes the layout, which changes the room: settle in a few passes
        canvas.draw()
        renderer = canvas.get_renderer()
        changed = False
        suptitle = figure._suptitle  # the Text itself (get_suptitle gives only its string)
        texts = [(suptitle, figure.bbox.width * 0.96)] if suptitle is not None else []
        texts += [(ax.title, ax.get_window_extent(renderer).width) for ax in figure.axes if ax.get_title()]
        for text, room in texts:
            width = text.get_window_extent(renderer).width
            if width > room:
                flat = " ".join(text.get_text().split())
                chars = max(12, int(len(flat) * room / width))
                text.set_text(textwrap.fill(flat, chars))
                changed = True
        if not changed:
            return


def save_figures(figures: Sequence[NamedFigure], out_dir: str | Path) -> list[Path]:
    out = Path(out_dir).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for named in figures:
        path = out / f"{named.name}.png"
        named.figure.savefig(path, dpi=110)
        paths.append(path)
    return paths
