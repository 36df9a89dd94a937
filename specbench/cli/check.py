"""`specbench check`: the regression battery for one target/method/draft/k, as a pass/fail table and exit code."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from specbench.cli import options as o
from specbench.cli.app import app


@app.command()
def check(
    target: o.Target,
    method: o.Method = "draft",
    draft: o.Draft = None,
    num_steps: Annotated[int, typer.Option("--num-steps", "-k", help="drafts per round")] = 3,
    dtype: o.Dtype = "fp32",
    device: o.Device = "cpu",
    inject: Annotated[Optional[str], typer.Option("--inject", help="fault to inject (specbench.faults)")] = None,
    checks: Annotated[str, typer.Option("--checks", help="comma list of greedy,sampled,oracle,invariants,baseline")]
    = "greedy,sampled,oracle,invariants,baseline",
    max_tokens: Annotated[int, typer.Option("--max-tokens")] = 32,
    data_dir: Annotated[Optional[str], typer.Option("--data-dir", help="local data root (gsm8k/, mt_bench/)")] = None,
    save_baseline: Annotated[Optional[str], typer.Option("--save-baseline", help="write per-position acceptance")]
    = None,
    baseline: Annotated[Optional[str], typer.Option("--baseline", help="compare acceptance with this file")] = None,
    tolerance: Annotated[float, typer.Option("--tolerance", help="allowed acceptance drop per position")] = 0.05,
    kv_cache_gb: Annotated[float, typer.Option("--kv-cache-gb")] = 0.5,
    seed: o.Seed = 0,
) -> None:
    """Lossless greedy + sampled, draft oracle, invariant sweep, acceptance baseline; exit 1 when any check fails."""
    from specbench.check.baseline import load_baseline, measure_acceptance, save_baseline as save
    from specbench.check.battery import run_checks
    from specbench.check.prompts import check_prompts
    from specbench.check.result import format_table
    from specbench.check.setup import CheckSetup
    from specbench.faults import mutant_label

    prompts = tuple(check_prompts(data_dir))
    setup = CheckSetup(target, method, draft, num_steps, prompts, max_tokens=max_tokens, dtype=dtype, device=device,
                       inject=inject, kv_cache_gb=kv_cache_gb, seed=seed)
    if save_baseline:
        save(measure_acceptance(setup), save_baseline)
        print(f"acceptance baseline written to {save_baseline}")
    names = tuple(c.strip() for c in checks.split(",") if c.strip())
    results = run_checks(setup, names, baseline=load_baseline(baseline) if baseline else None, tolerance=tolerance)
    title = f"specbench check: {method} k={num_steps} {dtype} {mutant_label(inject)}".rstrip()
    print(format_table(results, title))
    raise typer.Exit(0 if all(r.passed for r in results) else 1)
