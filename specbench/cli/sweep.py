"""`specbench sweep`: a grid of cells over one engine, every number written to parquet under results/<run-id>/."""

from __future__ import annotations

import math
from typing import Annotated, Optional

import typer

from specbench.cli import load_options as lo
from specbench.cli import options as o
from specbench.cli import server_options as so
from specbench.cli.app import app
from specbench.runs import deadlines
from specbench.runs.sweep_config import DEFAULT_MAX_WARMUP, MAX_WARMUP


def sweep(
    ctx: typer.Context,
    workload: Annotated[str, typer.Option("--workload", "-w", help="gsm8k | mt_bench | spec_bench | random | "
                                          "file:PATH (JSONL prompt/messages, ShareGPT JSON)")] = "gsm8k",
    data_dir: o.DataDir = None,
    limit: Annotated[Optional[int], typer.Option("--num-prompts", "--limit", "-n", help="first N samples")] = None,
    shots: Annotated[Optional[int], typer.Option("--shots", help="gsm8k few-shot examples (default 5)")] = None,
    chat_template: Annotated[Optional[bool], typer.Option("--chat-template/--no-chat-template",
                                                          help="apply the tokenizer's chat template "
                                                          "(default: on for chat workloads)")] = None,
    max_tokens: Annotated[Optional[int], typer.Option("--max-tokens", help="max new tokens (default: "
                                                      "the workload's)")] = None,
    input_len: Annotated[Optional[int], typer.Option("--input-len", help="random workload prompt length")] = None,
    output_len: Annotated[Optional[int], typer.Option("--output-len", help="random workload output length")] = None,
    concurrency: Annotated[str, typer.Option("--concurrency", "-c", help="requests in flight, e.g. 1,16,64")] = "1",
    temperature: Annotated[str, typer.Option("--temperature", "-t", help="e.g. 0,1; 'default' = the workload's "
                                             "per-sample temperature")] = "0",
    num_steps: Annotated[Optional[str], typer.Option("--num-steps", "-k", help="draft tokens per round, e.g. "
                                                     "0,1,3,5 (default: 0,1,3,5 with a method, else 0)")] = None,
    speedup: Annotated[bool, typer.Option("--speedup/--no-speedup", help="add the num-steps 0 baseline "
                                          "(speedup, answer agreement; embedded or --server-cmd)")] = True,
    top_p: Annotated[float, typer.Option("--top-p")] = 1.0,
    top_k: Annotated[int, typer.Option("--top-k")] = -1,
    request_rate: Annotated[float, typer.Option("--request-rate", help="arrivals/s; inf = all at once under the "
                                                "concurrency cap")] = math.inf,
    burstiness: Annotated[float, typer.Option("--burstiness", help="gamma shape of arrival gaps "
                                              "(1 = Poisson, < 1 burstier)")] = 1.0,
    duration: lo.Duration = None,
    ramp_up_strategy: lo.RampUpStrategy = None,
    ramp_up_start_rps: lo.RampUpStartRps = None,
    ramp_up_end_rps: lo.RampUpEndRps = None,
    warmup: Annotated[Optional[int], typer.Option("--warmup", help="unmeasured requests before each cell, "
                                                  "synthetic prompts (default: the cell's concurrency, at most "
                                                  f"{DEFAULT_MAX_WARMUP}; at most {MAX_WARMUP})")] = None,
    cache_reset: lo.CacheReset = True,
    goodput: lo.Goodput = None,
    optimize: lo.Optimize = "throughput",
    reasoning_parser: lo.ReasoningParser = None,
    repeats: Annotated[int, typer.Option("--repeats", help="run the grid N times (noise estimate)")] = 1,
    backend: Annotated[str, typer.Option("--backend", help="embedded (in-process engine) | openai (an "
                                         "OpenAI-compatible server: vLLM, SGLang, TensorRT-LLM, specbench serve)")
                       ] = "embedded",
    base_url: Annotated[Optional[str], typer.Option("--base-url", help="openai: server root, e.g. "
                                                    "http://127.0.0.1:8000")] = None,
    server_model: Annotated[Optional[str], typer.Option("--model", help="openai: model to request (default: "
                                                        "the server's first /v1/models entry)")] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="openai: environment variable "
                                                       "holding the API key (never stored)")] = None,
    request_timeout: so.RequestTimeout = deadlines.REQUEST_TIMEOUT_S,
    info_timeout: so.InfoTimeout = deadlines.INFO_TIMEOUT_S,
    metrics_timeout: so.MetricsTimeout = deadlines.METRICS_TIMEOUT_S,
    cache_reset_timeout: so.CacheResetTimeout = deadlines.CACHE_RESET_TIMEOUT_S,
    server_cmd: so.ServerCmd = None,
    server_baseline_cmd: so.ServerBaselineCmd = None,
    server_adapter: so.ServerAdapter = "auto",
    server_ready_timeout: so.ServerReadyTimeout = deadlines.SERVER_READY_TIMEOUT_S,
    label: Annotated[Optional[str], typer.Option("--label", help="tag stored with every row, e.g. "
                                                 "before / after")] = None,
    results_dir: Annotated[str, typer.Option("--results-dir", help="parent of the run directory")] = "results",
    run_id: Annotated[Optional[str], typer.Option("--run-id", help="default: <time>-<config hash>")] = None,
    resume: Annotated[Optional[str], typer.Option("--resume", help="finish the missing cells of RUN_DIR")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")] = False,
    engine: dict = None,  # the shared engine option group (options.engine_options)
) -> None:
    """Run the cartesian grid concurrency x temperature x num-steps (x repeats) and write results/<run-id>/."""
    from specbench.bench.grid import default_num_steps, parse_int_list, parse_temperature_list
    from specbench.bench.report import format_report
    from specbench.bench.sweep import run_sweep
    from specbench.runs.sweep_config import FLAT_NAMES, SweepConfig

    values = dict(ctx.params)
    values.update(
        concurrency=parse_int_list(concurrency, "--concurrency"),
        temperature=parse_temperature_list(temperature),
        num_steps=default_num_steps(engine["method"]) if num_steps is None else parse_int_list(num_steps, "--num-steps"),
        goodput=tuple(goodput or ()),
    )
    values.update(engine)
    fields = set(FLAT_NAMES)
    # Preset commands fix some fields (no option for them): on --resume those must match the run like explicit ones.
    fixed = ctx.meta.get("specbench.fixed", {})
    explicit = {name for name in ctx.params if _is_explicit(ctx, name)} | (fields - set(ctx.params))
    report = run_sweep(SweepConfig.from_flat({**values, **fixed}), explicit=explicit & fields)
    print(format_report(report))


def _is_explicit(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


sweep = o.engine_options()(sweep)
app.command("sweep")(sweep)
