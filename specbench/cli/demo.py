"""`specbench demo`: a small real sweep on the default model that prints the summary table."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from specbench.bench.demo import DEMO_LIMIT, DEMO_MAX_TOKENS, DEMO_SHOTS, DEMO_SUMMARY
from specbench.cli import options as o
from specbench.cli.sweep_options import DataDir, sweep_option
from specbench.runs.sweep_config import RESULTS_DIR
from specbench.workloads.gsm8k import NUM_SHOTS as GSM8K_NUM_SHOTS

# The command's help text (cli/app.py registers the command with it).
HELP = f"{DEMO_SUMMARY}: results/<run-id>/ and a summary table."


def demo(
    target: o.option_type("target") = "default",
    limit: Annotated[int, typer.Option("--num-prompts", "--limit", "-n", help="GSM8K questions")] = DEMO_LIMIT,
    shots: Annotated[int, typer.Option("--shots", help=f"few-shot examples (the gsm8k protocol uses "
                                        f"{GSM8K_NUM_SHOTS})")] = DEMO_SHOTS,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="max new tokens per question")] = DEMO_MAX_TOKENS,
    data_dir: DataDir = None,
    results_dir: Annotated[str, typer.Option("--results-dir")] = RESULTS_DIR,
    quiet: sweep_option("quiet") = False,
) -> None:
    from specbench.bench.demo import demo_config, demo_headline
    from specbench.bench.report import format_report
    from specbench.bench.sweep import run_sweep

    start = time.perf_counter()
    config = demo_config(
        target, limit=limit, shots=shots, max_tokens=max_tokens, results_dir=results_dir, data_dir=data_dir,
        quiet=quiet,
    )
    report = run_sweep(config)
    headline = demo_headline(report.cells)  # agreement first: accuracy says little on a model that scores ~0
    if headline:
        print("\n".join(headline) + "\n")
    print(format_report(report))
    print(f"demo finished in {time.perf_counter() - start:.0f} s")
