"""`specbench check`: the regression battery for one target/method/draft/k, as a pass/fail table and exit code."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from specbench.check.engine_defaults import CHECK_ENGINE_DEFAULTS
from specbench.check.names import CHECKS
from specbench.cli import options as o
from specbench.cli.sweep_options import DataDir, sweep_option
from specbench.config import ENGINE_OPTION_NAMES
from specbench.runs.sweep_config import DEFAULT_HELP_METHOD

# The check engine's defaults as option defaults, with a larger KV pool than the library's (real models from the
# command line, not the selftest's tiny ones) and --device auto like every other command. --method left out:
# `default_method` (n-gram, or the draft LM when --draft is given), as in sweep.
CHECK_DEFAULTS = {**{k: v for k, v in CHECK_ENGINE_DEFAULTS.items() if k in ENGINE_OPTION_NAMES},
                  "device": "auto", "kv_cache_gb": 0.5, "method": DEFAULT_HELP_METHOD}


@o.engine_options(CHECK_DEFAULTS)
def check(
    ctx: typer.Context,
    num_steps: Annotated[int, typer.Option("--num-steps", "-k", help="drafts per round")] = 3,
    checks: Annotated[str, typer.Option("--checks", help=f"comma list of {','.join(CHECKS)}")] = ",".join(CHECKS),
    budget: Annotated[str, typer.Option("--budget", help="full (every check at full size: for a GPU) | fast (a few "
                                        "minutes on CPU for a ~135M model; the table says what it skipped)")] = "full",
    max_tokens: Annotated[int, typer.Option("--max-tokens")] = 32,
    data_dir: DataDir = None,
    save_baseline: Annotated[Optional[str], typer.Option("--save-baseline", help="write per-position acceptance")]
    = None,
    baseline: Annotated[Optional[str], typer.Option("--baseline", help="compare acceptance with this file")] = None,
    baseline_alpha: Annotated[float, typer.Option("--baseline-alpha", help="false-alarm rate of the per-position "
                                                  "acceptance-drop test (Fisher exact on the draft counts)")] = 0.01,
    base_url_spec: Annotated[Optional[str], typer.Option("--base-url-spec", help="check a server pair instead: "
                                                         "the speculative server's root URL")] = None,
    base_url_ref: Annotated[Optional[str], typer.Option("--base-url-ref", help="with --base-url-spec: the "
                                                        "non-speculative reference server's root URL")] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="server pair: variable holding the "
                                                       "API key")] = None,
    quiet: sweep_option("quiet") = False,
    engine: dict = None,  # the shared engine option group (options.engine_options), check's own defaults
    fault: object = None,  # --inject (options.engine_options): the fault checked, or None
) -> None:
    """Lossless greedy + sampled, draft oracle, invariant sweep, acceptance baseline; exit 1 when any check fails,
    3 when one crashed (its row says what raised, where), 2 on a user error.

    With --base-url-spec/--base-url-ref it runs the greedy lossless check against two OpenAI-compatible
    servers instead (the other checks need the embedded engine's internals).
    """
    if base_url_spec or base_url_ref:
        from specbench.cli.check_lossless import check_lossless as check_server_pair
        from specbench.errors import SpecbenchError

        if not (base_url_spec and base_url_ref):
            raise SpecbenchError("a server-pair check needs both --base-url-spec and --base-url-ref")
        # the rest: check-lossless's own defaults
        check_server_pair(base_url_spec=base_url_spec, base_url_ref=base_url_ref, data_dir=data_dir,
                          max_tokens=max_tokens, api_key_env=api_key_env, quiet=quiet)
        return
    from specbench.check.baseline import load_baseline, measure_acceptance, save_baseline as save
    from specbench.check.battery import CheckContext, run_checks
    from specbench.check.budget import resolve_budget
    from specbench.check.prompts import check_prompts
    from specbench.check.result import check_exit_status, format_table
    from specbench.check.engine_defaults import check_engine
    from specbench.check.setup import CheckSetup
    from specbench.faults import mutant_label
    from specbench.runs.phase_progress import PhaseProgress
    from specbench.runs.sweep_config import default_method

    if ctx.get_parameter_source("method").name in ("DEFAULT", "DEFAULT_MAP"):
        engine = {**engine, "method": default_method(engine["draft"])}
    chosen = resolve_budget(budget)
    prompts = tuple(check_prompts(data_dir))
    inject = None if fault is None else fault.name
    setup = CheckSetup(check_engine(**engine, max_num_steps=num_steps), prompts, max_tokens, inject=inject)
    if save_baseline:
        save(measure_acceptance(chosen.apply(setup)), save_baseline)
        print(f"acceptance baseline written to {save_baseline}")
    names = tuple(c.strip() for c in checks.split(",") if c.strip())
    ctx = CheckContext(baseline=load_baseline(baseline) if baseline else None, baseline_alpha=baseline_alpha,
                       budget=chosen, baseline_source=baseline or "")
    results = run_checks(setup, names, ctx, PhaseProgress("check", len(names), quiet=quiet))
    title = (f"specbench check: {engine['method']} k={num_steps} {engine['dtype']} budget {budget} "
             f"{mutant_label(inject)}").rstrip()
    print(format_table(results, title))
    if chosen.skipped:
        print(chosen.skipped)
    raise typer.Exit(check_exit_status(results))
