"""`specbench compare BEFORE AFTER`: the before/after table with a confidence interval and verdict per delta."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from specbench.runs.sweep_config import RESULTS_DIR

RunArg = Annotated[str, typer.Argument(help="run directory, or the run id or --label of a run in --results-dir")]


def compare(
    before: RunArg,
    after: RunArg,
    results_dir: Annotated[str, typer.Option("--results-dir",
                                             help="where run ids and labels are looked up")] = RESULTS_DIR,
    metrics: Annotated[Optional[str], typer.Option("--metrics", help="comma list of metric names or groups "
                                                   "(throughput, latency, acceptance, speedup, accuracy, "
                                                   "agreement); default: all")] = None,
    fmt: Annotated[Optional[str], typer.Option("--format", help="console | md | csv | json (default: from the "
                                               "--output suffix, else console)")] = None,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="write the table to FILE")] = None,
    fail_on: Annotated[Optional[str], typer.Option("--fail-on", help="regressed[:metric,...]: exit 1 when a "
                                                   "(named) metric regressed beyond noise, could not be judged "
                                                   "(speed metrics need >= 2 repeats a side), or greedy outputs "
                                                   "differ from k=0 after the change; a speed change within the "
                                                   "runs' load drift is a note")] = None,
    wide: Annotated[bool, typer.Option("--wide", help="every column (MDE, noise and load per row), no width "
                                       "limit (default: 120 columns)")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="runs differing in workload, data, model, dtype, "
                                         "device or a setting that changes what is measured (shots, max tokens, "
                                         "prompt count, ...) are an error, not a warning")] = False,
    plots: Annotated[Optional[str], typer.Option("--plots", help="also write the figures of both runs to DIR")] = None,
    resamples: Annotated[int, typer.Option("--resamples", help="bootstrap resamples")] = 1000,
    confidence: Annotated[float, typer.Option("--confidence", help="interval level")] = 0.95,
    seed: Annotated[int, typer.Option("--seed", help="bootstrap seed")] = 0,
    min_change: Annotated[float, typer.Option("--min-change", help="smallest |delta| (%, or points for accuracy) "
                                              "called a change even when beyond noise")] = 0.0,
    show_changed: Annotated[int, typer.Option("--show-changed", help="list up to N requests whose answer "
                                              "changed")] = 0,
) -> None:
    """Match the cells of two runs and report Before / After / Delta, a bootstrap CI and a verdict per metric."""
    from specbench.compare.comparison import CompareOptions, compare_runs
    from specbench.compare.drilldown import changed_answers, format_changed
    from specbench.compare.fail_on import EXIT_FAILED, failure_report, parse_fail_on
    from specbench.compare.loading import load_run
    from specbench.compare.output import choose_format, console_width, render, write_output
    from specbench.compare.plots import write_plots

    gate = parse_fail_on(fail_on) if fail_on else None
    chosen = choose_format(fmt, output)
    names = tuple(n.strip() for n in metrics.split(",") if n.strip()) if metrics else None
    options = CompareOptions(names, resamples, confidence, seed, min_change, strict)
    runs = load_run(before, results_dir), load_run(after, results_dir)
    comparison = compare_runs(*runs, options)

    for d in comparison.critical_differences:
        print(f"WARNING: the runs differ in {d.field} ({d.before} vs {d.after}): deltas may reflect that, "
              "not the change under test (--strict makes this an error)", file=sys.stderr)
    if output:
        path = write_output(render(comparison, chosen, wide=wide), output)
        print(render(comparison, "console", console_width(), wide), end="")
        print(f"wrote {path}")
    else:
        print(render(comparison, chosen, console_width(), wide), end="")
    if show_changed:
        print(format_changed(changed_answers(*runs), show_changed))
    if plots:
        for path in write_plots(runs, plots):
            print(f"wrote {path}")
    if gate is not None:
        for note in gate.drift_notes(comparison):
            print(note, file=sys.stderr)
        failures = gate.correctness(comparison) + gate.unjudged(comparison)
        for line in failures:
            print(line, file=sys.stderr)
        offending = gate.offending(comparison)
        if offending:
            print(failure_report(fail_on, offending), file=sys.stderr)
        if offending or failures:
            raise typer.Exit(EXIT_FAILED)
