"""`specbench demo`: a small real sweep on the default model that prints the summary table."""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer

from specbench.cli import options as o
from specbench.cli.app import app


@app.command()
def demo(
    target: o.option_type("target") = "default",
    limit: Annotated[int, typer.Option("--num-prompts", "--limit", "-n", help="GSM8K questions")] = 4,
    shots: Annotated[int, typer.Option("--shots", help="few-shot examples (the gsm8k protocol uses 5)")] = 2,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="max new tokens per question")] = 32,
    data_dir: Annotated[Optional[str], typer.Option("--data-dir", help="local data root")] = None,
    results_dir: Annotated[str, typer.Option("--results-dir")] = "results",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")] = False,
) -> None:
    """GSM8K 5-shot subset, concurrency 1,4 x num-steps 0,3 with n-gram drafts: results/<run-id>/ and a summary."""
    from specbench.bench.demo import demo_config
    from specbench.bench.report import format_report
    from specbench.bench.sweep import run_sweep

    start = time.perf_counter()
    config = demo_config(
        target, limit=limit, shots=shots, max_tokens=max_tokens, results_dir=results_dir, data_dir=data_dir,
        quiet=quiet,
    )
    report = run_sweep(config)
    print(format_report(report))
    print(f"demo finished in {time.perf_counter() - start:.0f} s")
