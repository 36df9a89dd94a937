"""Options of `sweep` (and its presets gsm8k / mtbench) for the load pattern, warmup cache policy, goodput and the
best-k recommendation. Declared here once; `SweepConfig` holds their values (runs/sweep_config.py)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from specbench.cli.options import LOAD, OUTPUT, WORKLOAD

Duration = Annotated[
    Optional[float],
    typer.Option("--duration", rich_help_panel=LOAD,
                 help="seconds of arrivals per cell, samples cycled (instead of each sample once)"),
]
RampUpStrategy = Annotated[
    Optional[str],
    typer.Option("--ramp-up-strategy", rich_help_panel=LOAD,
                 help="linear: ramp the arrival rate from --ramp-up-start-rps to "
                 "--ramp-up-end-rps over the cell (replaces --request-rate)"),
]
RampUpStartRps = Annotated[
    Optional[float], typer.Option("--ramp-up-start-rps", rich_help_panel=LOAD, help="ramp start rate (req/s)")
]
RampUpEndRps = Annotated[
    Optional[float], typer.Option("--ramp-up-end-rps", rich_help_panel=LOAD, help="ramp end rate (req/s)")
]
CacheReset = Annotated[
    bool,
    typer.Option("--cache-reset/--no-cache-reset", rich_help_panel=LOAD,
                 help="reset the server's prefix cache before each cell where it "
                 "offers an endpoint (vLLM /reset_prefix_cache, SGLang /flush_cache)"),
]
Goodput = Annotated[
    Optional[list[str]],
    typer.Option("--goodput", rich_help_panel=OUTPUT,
                 help="SLO bounds in ms, e.g. 'ttft:200,tpot:50,e2el:2000' (repeatable): goodput "
                 "counts the requests meeting every bound"),
]
Optimize = Annotated[
    str,
    typer.Option("--optimize", rich_help_panel=OUTPUT,
                 help="best k per (workload, concurrency, temperature): throughput (highest output "
                 "throughput) | tpot (lowest median TPOT)"),
]
ReasoningParser = Annotated[
    Optional[str],
    typer.Option("--reasoning-parser", rich_help_panel=WORKLOAD,
                 help="think: split inline <think>...</think> reasoning from the answer "
                 "(embedded engine, or servers without their own parser); the answer is scored"),
]
Yes = Annotated[
    bool,
    typer.Option("--yes", "-y", rich_help_panel=OUTPUT,
                 help="start without asking when the plan's estimate is long "
                 "(asked only from a terminal)"),
]
