"""What a sweep prints at the end: the summary table, per-category acceptance, where the results are."""

from __future__ import annotations

from specbench.bench.summary_table import format_categories, format_summary
from specbench.bench.sweep import SweepReport


def format_report(report: SweepReport, width: int | None = None) -> str:
    config = report.config
    head = (
        f"{config.workload} | method {config.method} | target {config.target}"
        + (f" | label {config.label}" if config.label else "")
        + f" | {report.num_cells_run} cells run"
        + (f", {report.num_cells_skipped} already complete" if report.num_cells_skipped else "")
    )
    parts = [head, format_summary(report.cells, width)]
    if len({row["category"] for row in report.categories}) > 1:
        parts.append(format_categories(report.categories, width))
    parts.append(f"results: {report.run_dir}/ (cells, requests, steps, categories .parquet; manifest.json)")
    return "\n\n".join(part for part in parts if part)
