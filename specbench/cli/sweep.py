"""`specbench sweep`: a grid of cells over one engine, every number written to parquet under results/<run-id>/.

Its options are generated: the sweep's from SweepConfig's fields (cli/sweep_options.py), the engine's from
EngineConfig's (cli/options.py)."""

from __future__ import annotations

import sys

import typer

from specbench.cli import options as o
from specbench.cli.sweep_options import Yes, sweep_options
from specbench.runs.sweep_config import DEFAULT_HELP_METHOD, DEFAULT_SWEEP_NUM_STEPS, EMBEDDED


def sweep(
    ctx: typer.Context,
    yes: Yes = False,
    options: dict = None,  # the sweep option group (sweep_options): SweepConfig field values
    engine: dict = None,  # the shared engine option group (options.engine_options)
    fault: object = None,  # --inject (options.engine_options): the fault applied to the engine, or None
) -> None:
    """Run the grid concurrency x temperature x num-steps (x repeats) into results/<run-id>/.

    Prints its plan (cells, prompts, time estimate) first; without --method it measures n-gram (or --draft) drafts.
    """
    from specbench.bench.plan import confirm_plan
    from specbench.bench.report import format_report
    from specbench.bench.sweep import run_sweep

    config, explicit = sweep_config(ctx, options, engine, fault)
    report = run_sweep(config, explicit=explicit,
                       confirm=lambda plan: confirm_plan(plan, assume_yes=yes, is_interactive=sys.stdin.isatty()),
                       fault=fault)
    print(format_report(report))


def sweep_config(ctx: typer.Context, options: dict, engine: dict, fault: object):
    """The SweepConfig the sweep's options describe (defaults resolved as `sweep` documents them), and the names
    of the fields the user set."""
    from specbench.runs.sweep_config import (
        FLAT_NAMES, SweepConfig, default_limit, default_method, default_num_steps, default_repeats,
    )

    values = dict(options)
    engine = dict(engine)
    is_embedded = values["backend"] == EMBEDDED
    if not _is_explicit(ctx, "method"):  # the default sweep measures speculation; a server runs its own method
        engine["method"] = default_method(engine["draft"]) if is_embedded else "none"
    if not _is_explicit(ctx, "method") and is_embedded:
        steps = DEFAULT_SWEEP_NUM_STEPS
    else:
        steps = default_num_steps(engine["method"])
    fixed = ctx.meta.get("specbench.fixed", {})
    limit = values["limit"]  # not given: the default sample; 0: all
    num_prompts = default_limit(fixed.get("workload", values.get("workload"))) if limit is None else limit or None
    # the default sample of whole cells (a --duration cell cycles its prompts for a fixed time instead)
    is_default_sample = limit is None and num_prompts is not None and values["duration"] is None
    values.update(
        limit=num_prompts,
        num_steps=steps if values["num_steps"] is None else values["num_steps"],
        repeats=default_repeats(is_default_sample) if values["repeats"] is None else values["repeats"],
    )
    values.update(engine, inject=None if fault is None else fault.name)  # the run records it
    fields = set(FLAT_NAMES)
    # Preset commands fix some fields (no option for them): on --resume those must match the run like explicit ones.
    explicit = {name for name in ctx.params if _is_explicit(ctx, name)} | (fields - set(ctx.params))
    return SweepConfig.from_flat({**values, **fixed}), explicit & fields


def _is_explicit(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


sweep = o.engine_options({"method": DEFAULT_HELP_METHOD})(sweep_options()(sweep))
