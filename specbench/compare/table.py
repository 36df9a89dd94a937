"""The seed-004 layout: per (workload, method, num-steps, tree shape, temperature) one table, a row per metric and, per
concurrency, Before / After / Delta / CI / Verdict (and, wide or Markdown, MDE / Noise) columns, after the headline
(compare/headline.py: correctness first). Rendered as Markdown or as aligned console text: DEFAULT_WIDTH columns
unless --wide."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from specbench.compare.comparison import Comparison, MetricDelta
from specbench.compare.formatting import (
    MISSING,
    console_note,
    delta_text,
    interval_text,
    mde_text,
    noise_text,
    run_text,
    statistics_note,
    value_text,
    verdict_counts,
    verdict_text,
)
from specbench.compare.headline import headline
from specbench.compare.metrics_catalog import OUTPUT_THROUGHPUT, Metric
from specbench.compare.run_info import settings_text

COLUMNS_PER_CONCURRENCY = 7  # wide and Markdown; the console's default drops MDE and Noise
NARROW_COLUMNS = 5
DEFAULT_WIDTH = 120  # a terminal, a CI log, a PR comment: the console table fits this unless --wide


@dataclass(frozen=True)
class Block:
    title: str
    concurrencies: tuple[int, ...]
    rows: tuple[tuple[Metric, tuple[MetricDelta | None, ...]], ...]  # [num_metrics] x [num_concurrencies]


def blocks(comparison: Comparison) -> list[Block]:
    groups: dict[tuple, list[MetricDelta]] = {}
    for row in comparison.rows:
        k = row.key
        groups.setdefault((k.workload, k.method, k.num_steps, k.eagle_topk, k.draft_token_budget, k.temperature),
                          []).append(row)
    out = []
    for (workload, method, num_steps, *_), rows in sorted(groups.items()):
        concurrencies = tuple(sorted({r.key.concurrency for r in rows}))
        by_metric: dict[str, dict[int, MetricDelta]] = {}
        for r in rows:
            by_metric.setdefault(r.metric.name, {})[r.key.concurrency] = r
        ordered = [m for m in comparison.metrics if m.name in by_metric]
        key = rows[0].key
        title = f"{workload} · {method} · k={num_steps}{key.shape_text} · temperature {key.temperature_text}"
        out.append(Block(title, concurrencies,
                         tuple((m, tuple(by_metric[m.name].get(c) for c in concurrencies)) for m in ordered)))
    return out


def _cells(row: MetricDelta | None, metric: Metric, markdown: bool, wide: bool = True) -> list[str]:
    if row is None:
        return [MISSING, MISSING, MISSING, "-", "n/a", "-", "-"][:COLUMNS_PER_CONCURRENCY if wide else NARROW_COLUMNS]
    out = [value_text(metric, row.before), value_text(metric, row.after), delta_text(row),
           interval_text(metric, row.interval), verdict_text(row, emphasis=markdown)]
    return out + [mde_text(row), noise_text(row)] if wide else out


def _header(concurrencies: tuple[int, ...], confidence: float, wide: bool = True) -> list[str]:
    level = f"{100 * confidence:g}% CI"
    out = ["Metric"]
    for c in concurrencies:
        out += [f"Before (c={c})", f"After (c={c})", "Delta", level, "Verdict", *(("MDE", "Noise") if wide else ())]
    return out


def _unmatched(comparison: Comparison) -> list[str]:
    m = comparison.matching
    lines = [f"only in before: {k.describe()}" for k in m.only_before]
    lines += [f"only in after: {k.describe()}" for k in m.only_after]
    return lines


def _preamble(comparison: Comparison, width: int = 1_000_000) -> list[str]:
    """Correctness and the inside-run ratios first (headline.py), then what the runs were and how they differ."""
    fill = lambda text: textwrap.fill(text, width, subsequent_indent="    ")  # noqa: E731
    settings = fill(f"settings: {settings_text(comparison.before, comparison.after)}")
    lines = [fill(f"Before: {run_text(comparison.before)}  After: {run_text(comparison.after)}")]
    lines += [fill(line) for line in headline(comparison)] + [settings]
    if comparison.before.target_architecture != "-":
        lines.append(f"target: {comparison.before.target_architecture}")
    for d in comparison.differences:
        prefix = "WARNING: not comparable:" if d.is_critical else "differs:"
        lines.append(f"{prefix} {d.field}: {d.before} -> {d.after}")
    return lines


def render_markdown(comparison: Comparison) -> str:
    parts = [f"## specbench compare: {run_text(comparison.before)} → {run_text(comparison.after)}", ""]
    differences = [line.replace("\n", " ") for line in _preamble(comparison)[1:]]
    parts += [f"- {line}" for line in differences] + [""] if differences else []
    for block in blocks(comparison):
        header = _header(block.concurrencies, comparison.options.confidence)
        parts += [f"### {block.title}", "", "| " + " | ".join(header) + " |",
                  "|---|" + "---:|---:|---:|:---:|:---|---:|:---|" * len(block.concurrencies)]
        for metric, row_cells in block.rows:
            cells = [metric.title] + [c for r in row_cells for c in _cells(r, metric, markdown=True)]
            parts.append("| " + " | ".join(cells) + " |")
        parts.append("")
    unmatched = _unmatched(comparison)
    if unmatched:
        parts += ["**Unmatched cells** (shown as N/A above):", ""] + [f"- {line}" for line in unmatched] + [""]
    parts += [f"**Verdicts:** {verdict_counts(comparison)}.", "", f"_{statistics_note(comparison)}_", ""]
    return "\n".join(parts)


def render_console(comparison: Comparison, width: int | None = None, wide: bool = False) -> str:
    """Aligned text in `width` columns (DEFAULT_WIDTH; wide: no limit, with the MDE and Noise columns);
    concurrencies that do not fit continue in a further table below."""
    width = 1_000_000 if wide else min(width or DEFAULT_WIDTH, DEFAULT_WIDTH)
    parts = _preamble(comparison, width)
    for block in blocks(comparison):
        labels = [m.title for m, _ in block.rows]
        cells = [[c for r in row_cells for c in _cells(r, m, markdown=False, wide=wide)]
                 for m, row_cells in block.rows]
        load = "" if wide else _block_load(block)  # wide: the Noise column carries it on every row
        for chunk in _fit(block, labels, cells, width, comparison.options.confidence, wide):
            parts += ["", block.title] + ([textwrap.fill(load, width, subsequent_indent="    ")] if load else [])
            parts.append(chunk)
    unmatched = _unmatched(comparison)
    if unmatched:
        parts += ["", "Unmatched cells (N/A above):"] + [f"  {line}" for line in unmatched]
    parts += ["", f"Verdicts: {verdict_counts(comparison)}.", textwrap.fill(console_note(comparison), width)]
    return "\n".join(parts)


def _block_load(block: Block) -> str:
    """The load evidence the block's speed verdicts were judged beside, on its title line (the narrow table has
    no Noise column)."""
    controls, probe = {}, None
    for metric, rows in block.rows:
        for row in rows:
            if row is not None and row.metric.name == OUTPUT_THROUGHPUT.name and row.control_delta is not None:
                controls[row.key.concurrency] = row.control_delta
            if row is not None and row.probe_sd is not None:
                probe = row.probe_sd
    parts = [f"k=0 throughput {d:+.1%} (c={c})" for c, d in controls.items()]
    parts += [f"drift sd {probe:.0%}"] if probe is not None else []
    return f"speed judged beside the load: {', '.join(parts)}" if parts else ""


def _fit(block: Block, labels: list[str], cells: list[list[str]], width: int, confidence: float,
         wide: bool = True) -> list[str]:
    header = _header(block.concurrencies, confidence, wide)
    per = COLUMNS_PER_CONCURRENCY if wide else NARROW_COLUMNS
    columns = [[header[0]] + labels] + [[header[1 + j]] + [row[j] for row in cells] for j in range(len(header) - 1)]
    widths = [max(map(len, column)) for column in columns]
    group_width = [sum(widths[1 + per * i: 1 + per * (i + 1)]) + 2 * per for i in range(len(block.concurrencies))]
    chunks, current, used = [], [], widths[0]
    for i, group in enumerate(group_width):
        if current and used + group > width:
            chunks.append(current)
            current, used = [], widths[0]
        current.append(i)
        used += group
    chunks.append(current)
    out = []
    for chunk in chunks:
        picked = [0] + [1 + per * i + j for i in chunk for j in range(per)]
        lines = []
        for r in range(len(columns[0])):
            texts = [columns[j][r].ljust(widths[j]) if j == 0 else columns[j][r].rjust(widths[j]) for j in picked]
            lines.append("  ".join(texts).rstrip())
        lines.insert(1, "-" * len(lines[0]))
        out.append("\n".join(lines))
    return out
