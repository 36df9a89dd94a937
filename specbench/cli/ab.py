"""`specbench ab`: an interleaved A/B of two engines in one invocation (bench/ab.py). Side A takes the sweep's and
the engine's options; side B is A with the --b-* options applied."""

from __future__ import annotations

import dataclasses
import sys
from typing import Annotated, Optional

import typer

from specbench.cli import options as o
from specbench.cli.sweep import sweep_config
from specbench.cli.sweep_options import sweep_options
from specbench.runs.sweep_config import DEFAULT_HELP_METHOD

B_PANEL = "A/B: side B (side A: every other option)"


def ab(
    ctx: typer.Context,
    options: dict = None,  # the sweep option group: side A's (and the shared) settings
    engine: dict = None,  # the engine option group: side A's engine
    fault: object = None,  # --inject: side A's fault
    b_inject: Annotated[Optional[str], typer.Option("--b-inject", rich_help_panel=B_PANEL,
                                                    help="side B: this engine fault (e.g. slow-step)")] = None,
    b_draft: Annotated[Optional[str], typer.Option("--b-draft", rich_help_panel=B_PANEL,
                                                   help="side B: this draft model")] = None,
    b_method: Annotated[Optional[str], typer.Option("--b-method", rich_help_panel=B_PANEL,
                                                    help="side B: this speculative method")] = None,
    b_num_steps: Annotated[Optional[int], typer.Option("--b-num-steps", rich_help_panel=B_PANEL,
                                                       help="side B: this num-steps")] = None,
    fail_on_regressed: Annotated[bool, typer.Option("--fail-on-regressed", rich_help_panel=B_PANEL,
                                                    help="exit 1 when B regressed against A")] = False,
) -> None:
    """Alternate engine A and engine B cell by cell (A B, B A, ...) on the same prompts, and judge B against A on
    paired ratios: a verdict that survives a loaded machine, where two separate runs cannot."""
    from specbench.bench.ab import AbSide, format_ab, run_ab
    from specbench.compare.fail_on import EXIT_FAILED
    from specbench.faults import injection

    config, _ = sweep_config(ctx, options, engine, fault)
    if len(config.num_steps) > 1:
        config = dataclasses.replace(config, num_steps=(max(config.num_steps),))  # one k a side: the largest
    b_engine = dataclasses.replace(config.engine, **{k: v for k, v in (("draft", b_draft), ("method", b_method))
                                                     if v is not None})
    b_fault = injection(b_inject)
    b_config = dataclasses.replace(config, engine=b_engine, inject=b_inject,
                                   num_steps=config.num_steps if b_num_steps is None else (b_num_steps,))
    a_label = config.label or f"{config.engine.method} k={config.num_steps[0]}"
    b_label = f"{b_engine.method} k={b_config.num_steps[0]}" + (f" MUTANT[{b_inject}]" if b_inject else "")
    if b_config == config:  # an A/A run: how often this machine's noise alone gets a verdict (it should not)
        print("ab: side B equals side A (no --b-* option): an A/A calibration run", file=sys.stderr)
        b_label += " (A/A)"
    report = run_ab(AbSide(a_label, config, fault), AbSide(b_label, b_config, b_fault))
    print(format_ab(report))
    if fail_on_regressed and "regressed" in report.verdicts:
        raise typer.Exit(EXIT_FAILED)


ab = o.engine_options({"method": DEFAULT_HELP_METHOD})(sweep_options()(ab))
