"""`specbench sweep`: a grid of cells over one engine, every number written to parquet under results/<run-id>/."""

from __future__ import annotations

import math
import sys
from typing import Annotated, Optional

import typer

from specbench.cli import load_options as lo
from specbench.cli import options as o
from specbench.cli import server_options as so
from specbench.cli.app import app
from specbench.runs import deadlines
from specbench.runs.sweep_config import DEFAULT_MAX_WARMUP, MAX_WARMUP
from specbench.cli.options import LOAD, OUTPUT, SERVER, WORKLOAD
from specbench.runs.sweep_config import (
    DEFAULT_HELP_METHOD, DEFAULT_NUM_PROMPTS, DEFAULT_SAMPLE_REPEATS, DEFAULT_SWEEP_NUM_STEPS, SAMPLED_WORKLOADS,
)


def _ks(values: tuple[int, ...]) -> str:
    return ",".join(map(str, values))


def sweep(
    ctx: typer.Context,
    workload: Annotated[str, typer.Option("--workload", "-w", rich_help_panel=WORKLOAD, help="gsm8k | mt_bench | "
                                          "spec_bench | random | file:PATH (JSONL prompt/messages, ShareGPT JSON)")
                        ] = "gsm8k",
    data_dir: o.DataDir = None,
    limit: Annotated[Optional[int], typer.Option("--num-prompts", "--limit", "-n", rich_help_panel=WORKLOAD,
                                                 help="prompts per cell: the first N (mt_bench, spec_bench: a "
                                                 "seeded sample across categories); 0 = all (default: "
                                                 f"{DEFAULT_NUM_PROMPTS} of {'/'.join(SAMPLED_WORKLOADS)}, "
                                                 "else all)")] = None,
    shots: Annotated[Optional[int], typer.Option("--shots", rich_help_panel=WORKLOAD,
                                                 help="gsm8k few-shot examples (default 5)")] = None,
    chat_template: Annotated[Optional[bool], typer.Option("--chat-template/--no-chat-template",
                                                          rich_help_panel=WORKLOAD,
                                                          help="apply the tokenizer's chat template "
                                                          "(default: on for chat workloads)")] = None,
    max_tokens: Annotated[Optional[int], typer.Option("--max-tokens", rich_help_panel=WORKLOAD,
                                                      help="max new tokens (default: the workload's)")] = None,
    input_len: Annotated[Optional[int], typer.Option("--input-len", rich_help_panel=WORKLOAD,
                                                     help="random workload prompt length")] = None,
    output_len: Annotated[Optional[int], typer.Option("--output-len", rich_help_panel=WORKLOAD,
                                                      help="random workload output length")] = None,
    concurrency: Annotated[str, typer.Option("--concurrency", "-c", rich_help_panel=LOAD,
                                             help="requests in flight, e.g. 1,16,64")] = "1",
    temperature: Annotated[str, typer.Option("--temperature", "-t", rich_help_panel=WORKLOAD,
                                             help="e.g. 0,1; 'default' = the workload's per-sample temperature")
                           ] = "0",
    num_steps: Annotated[Optional[str], typer.Option("--num-steps", "-k", rich_help_panel=o.DRAFTING,
                                                     help="draft tokens per round, e.g. 0,1,3,5 (default: "
                                                     f"{_ks(DEFAULT_SWEEP_NUM_STEPS)} without --method, "
                                                     "0,1,3,5 with one, 0 with --method none)")] = None,
    speedup: Annotated[bool, typer.Option("--speedup/--no-speedup", rich_help_panel=o.DRAFTING,
                                          help="add the num-steps 0 baseline (speedup, answer agreement; "
                                          "embedded or --server-cmd)")] = True,
    top_p: Annotated[float, typer.Option("--top-p", rich_help_panel=WORKLOAD)] = 1.0,
    top_k: Annotated[int, typer.Option("--top-k", rich_help_panel=WORKLOAD)] = -1,
    request_rate: Annotated[float, typer.Option("--request-rate", rich_help_panel=LOAD, help="arrivals/s; inf = "
                                                "all at once under the concurrency cap")] = math.inf,
    burstiness: Annotated[float, typer.Option("--burstiness", rich_help_panel=LOAD, help="gamma shape of arrival "
                                              "gaps (1 = Poisson, < 1 burstier)")] = 1.0,
    duration: lo.Duration = None,
    ramp_up_strategy: lo.RampUpStrategy = None,
    ramp_up_start_rps: lo.RampUpStartRps = None,
    ramp_up_end_rps: lo.RampUpEndRps = None,
    warmup: Annotated[Optional[int], typer.Option("--warmup", rich_help_panel=LOAD, help="unmeasured requests "
                                                  "before each cell, synthetic prompts (default: the cell's "
                                                  f"concurrency, at most {DEFAULT_MAX_WARMUP}; at most {MAX_WARMUP})")
                      ] = None,
    cache_reset: lo.CacheReset = True,
    goodput: lo.Goodput = None,
    optimize: lo.Optimize = "throughput",
    reasoning_parser: lo.ReasoningParser = None,
    repeats: Annotated[Optional[int], typer.Option("--repeats", rich_help_panel=LOAD, help="run the grid N times "
                                                   f"(noise estimate; default {DEFAULT_SAMPLE_REPEATS} for the "
                                                   "default sample, else 1)")] = None,
    backend: Annotated[str, typer.Option("--backend", rich_help_panel=SERVER, help="embedded (in-process engine) "
                                         "| openai (an OpenAI-compatible server: vLLM, SGLang, TensorRT-LLM, "
                                         "specbench serve)")] = "embedded",
    base_url: Annotated[Optional[str], typer.Option("--base-url", rich_help_panel=SERVER, help="server root, "
                                                    "e.g. http://127.0.0.1:8000")] = None,
    server_model: Annotated[Optional[str], typer.Option("--model", rich_help_panel=SERVER, help="model to "
                                                        "request (default: the server's first /v1/models entry)")
                            ] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", rich_help_panel=SERVER, help="environment "
                                                       "variable holding the API key (never stored)")] = None,
    request_timeout: so.RequestTimeout = deadlines.REQUEST_TIMEOUT_S,
    info_timeout: so.InfoTimeout = deadlines.INFO_TIMEOUT_S,
    metrics_timeout: so.MetricsTimeout = deadlines.METRICS_TIMEOUT_S,
    cache_reset_timeout: so.CacheResetTimeout = deadlines.CACHE_RESET_TIMEOUT_S,
    server_cmd: so.ServerCmd = None,
    server_baseline_cmd: so.ServerBaselineCmd = None,
    server_adapter: so.ServerAdapter = "auto",
    server_ready_timeout: so.ServerReadyTimeout = deadlines.SERVER_READY_TIMEOUT_S,
    label: Annotated[Optional[str], typer.Option("--label", rich_help_panel=OUTPUT, help="tag stored with every "
                                                 "row, e.g. before / after")] = None,
    results_dir: Annotated[str, typer.Option("--results-dir", rich_help_panel=OUTPUT,
                                             help="parent of the run directory")] = "results",
    run_id: Annotated[Optional[str], typer.Option("--run-id", rich_help_panel=OUTPUT,
                                                  help="default: <time>-<config hash>")] = None,
    resume: Annotated[Optional[str], typer.Option("--resume", rich_help_panel=OUTPUT,
                                                  help="finish the missing cells of RUN_DIR")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", rich_help_panel=OUTPUT,
                                        help="no progress and no plan on stderr")] = False,
    yes: lo.Yes = False,
    engine: dict = None,  # the shared engine option group (options.engine_options)
) -> None:
    """Run the grid concurrency x temperature x num-steps (x repeats) into results/<run-id>/.

    Prints its plan (cells, prompts, time estimate) first; without --method it measures n-gram (or --draft) drafts.
    """
    from specbench.bench.grid import default_num_steps, parse_int_list, parse_temperature_list
    from specbench.bench.plan import confirm_plan
    from specbench.bench.report import format_report
    from specbench.bench.sweep import run_sweep
    from specbench.runs.sweep_config import FLAT_NAMES, SweepConfig, default_limit, default_method, default_repeats

    values = dict(ctx.params)
    values.pop("yes")
    engine = dict(engine)
    if not _is_explicit(ctx, "method"):  # the default sweep measures speculation; a server runs its own method
        engine["method"] = default_method(engine["draft"]) if backend == "embedded" else "none"
    if not _is_explicit(ctx, "method") and backend == "embedded":
        steps = DEFAULT_SWEEP_NUM_STEPS
    else:
        steps = default_num_steps(engine["method"])
    fixed = ctx.meta.get("specbench.fixed", {})
    num_prompts = default_limit(fixed.get("workload", workload)) if limit is None else limit or None
    # the default sample of whole cells (a --duration cell cycles its prompts for a fixed time instead)
    is_default_sample = limit is None and num_prompts is not None and duration is None
    values.update(
        limit=num_prompts,
        concurrency=parse_int_list(concurrency, "--concurrency"),
        temperature=parse_temperature_list(temperature),
        num_steps=steps if num_steps is None else parse_int_list(num_steps, "--num-steps"),
        goodput=tuple(goodput or ()),
        repeats=default_repeats(is_default_sample) if repeats is None else repeats,
    )
    values.update(engine)
    fields = set(FLAT_NAMES)
    # Preset commands fix some fields (no option for them): on --resume those must match the run like explicit ones.
    explicit = {name for name in ctx.params if _is_explicit(ctx, name)} | (fields - set(ctx.params))
    report = run_sweep(SweepConfig.from_flat({**values, **fixed}), explicit=explicit & fields,
                       confirm=lambda plan: confirm_plan(plan, assume_yes=yes, is_interactive=sys.stdin.isatty()))
    print(format_report(report))


def _is_explicit(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


sweep = o.engine_options({"method": DEFAULT_HELP_METHOD})(sweep)
app.command("sweep")(sweep)
