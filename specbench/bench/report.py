"""What a sweep prints at the end: the summary table, acceptance and agreement per sampling mode and category, where
the results are."""

from __future__ import annotations

from specbench.backends.credentials import public_url
from specbench.bench.backend_notes import backend_notes
from specbench.bench.check_notes import check_lines, histogram_lines, prefix_cache_lines
from specbench.bench.correctness_notes import correctness_lines
from specbench.bench.acceptance_notes import acceptance_definition_lines
from specbench.bench.speculation_notes import speculation_lines
from specbench.bench.flag_notes import flag_lines, inconsistent_cells, num_flagged
from specbench.bench.load_notes import load_notes
from specbench.bench.recommend import format_recommendations
from specbench.bench.sampling_split import format_group_summaries, mixed_sampling_note
from specbench.bench.summary_table import format_summary
from specbench.bench.sweep import SweepReport
from specbench.compare.crossover import format_crossovers
from specbench.runtime.hooks import mutant_label


def format_report(report: SweepReport, width: int | None = None) -> str:
    config, engine = report.config, report.config.engine
    server = f"{config.backend} server {public_url(config.base_url or '')}"
    where = f"target {engine.target}" if config.is_embedded else server
    if report.target_architecture != "-":
        where += f" ({report.target_architecture})"
    # The cells' labels: a drafting server swept without --method is labelled with its own method (drafting_note).
    methods = sorted({str(c["method"]) for c in report.cells}) or [engine.method]
    head = (
        f"{config.workload} | method {','.join(methods)} | {where}"
        + (f" | label {config.label}" if config.label else "")
        + (f" | {mutant_label(report.fault_injected)} (fault injected: not a real result)"
           if report.fault_injected else "")
        + (
            f" | SYNTHETIC ACCEPTANCE {','.join(map(str, engine.synthetic_acceptance))} (forced: output not lossless)"
            if engine.synthetic_acceptance
            else ""
        )
        + f" | {report.num_cells_run} cells run"
        + (f", {report.num_cells_skipped} already complete" if report.num_cells_skipped else "")
        + (f" | {num_flagged(report.cells)} speedups flagged" if num_flagged(report.cells) else "")
        + (f" | METRICS INCONSISTENT in {n} cells" if (n := len(inconsistent_cells(report.cells))) else "")
    )
    warnings = flag_lines(report.cells, config) + speculation_lines(report.cells) + check_lines(report.cells)
    parts = [head, "\n".join(correctness_lines(report.cells)), format_summary(report.cells, width),
             mixed_sampling_note(report.groups), "\n".join(warnings), "\n".join(histogram_lines(report.cells)),
             format_group_summaries(report.groups)]
    parts.append(format_recommendations(list(report.recommendations)))
    parts.append(format_crossovers(report.cells))
    parts.append("\n".join(prefix_cache_lines(report.cells)))
    parts.append("\n".join(acceptance_definition_lines(report.cells)))
    notes = backend_notes(report.cells) + load_notes(report.cells)
    if notes:
        parts.append("\n".join(f"note: {line}" for line in notes))
    tables = "cells, requests, steps, categories" + (", recommendations" if report.recommendations else "")
    parts.append(f"results: {report.run_dir}/ ({tables} .parquet; manifest.json)")
    return "\n\n".join(part for part in parts if part)
