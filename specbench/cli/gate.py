"""`specbench gate`: one CI command, one exit code (0 pass, 1 a stage failed, 2 user error, 3 crashed), one report."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from specbench.backends.near_tie import NEAR_TIE_MARGIN
from specbench.cli import options as o
from specbench.cli.sweep_options import DataDir, sweep_option
from specbench.runs import deadlines
from specbench.runs.sweep_config import DEFAULT_HELP_METHOD

GATE = "Gate"


@o.engine_options({"method": DEFAULT_HELP_METHOD, "device": "auto"})
def gate(
    ctx: typer.Context,
    num_steps: Annotated[int, typer.Option("--num-steps", "-k", help="k gated (with --base-url: the server's k, a "
                                           "label)", rich_help_panel=GATE)] = 3,
    reference: Annotated[Optional[str], typer.Option("--reference", help="compare with this reference file",
                                                     rich_help_panel=GATE)] = None,
    write_reference: Annotated[Optional[str], typer.Option("--write-reference", help="record this run as the "
                                                           "reference (JSON)", rich_help_panel=GATE)] = None,
    stages: Annotated[Optional[str], typer.Option("--stages", help="comma list of stages to run (default: all)",
                                                  rich_help_panel=GATE)] = None,
    skip: Annotated[Optional[str], typer.Option("--skip", help="comma list of stages not to run: lossless, "
                                                "logprobs, accuracy, acceptance, speed, outputs",
                                                rich_help_panel=GATE)] = None,
    report_md: Annotated[Optional[str], typer.Option("--report-md", help="also write the markdown report here",
                                                     rich_help_panel=GATE)] = None,
    junit: Annotated[Optional[str], typer.Option("--junit", help="write JUnit XML here (one testcase per stage)",
                                                 rich_help_panel=GATE)] = None,
    near_tie_margin: Annotated[float, typer.Option("--near-tie-margin", help="lossless: a mismatch whose top-2 "
                                                   "logprob margin is below this many nats is a near-tie",
                                                   rich_help_panel=GATE)] = NEAR_TIE_MARGIN,
    strict: Annotated[bool, typer.Option("--strict", help="lossless: near-ties fail too",
                                         rich_help_panel=GATE)] = False,
    accuracy_drop: Annotated[float, typer.Option("--accuracy-drop", help="accuracy: allowed drop (fraction) "
                                                 "beyond 1.645 x the combined stderr", rich_help_panel=GATE)] = 0.02,
    acceptance_rtol: Annotated[float, typer.Option("--acceptance-rtol", help="acceptance: allowed |AL/AL_ref - 1|",
                                                   rich_help_panel=GATE)] = 0.1,
    acceptance_alpha: Annotated[float, typer.Option("--acceptance-alpha", help="acceptance: false-alarm rate of "
                                                    "the per-position drop test", rich_help_panel=GATE)] = 0.01,
    acceptance_floor: Annotated[Optional[float], typer.Option("--acceptance-floor", help="acceptance: instead of "
                                                              "the test, rate_k >= FLOOR x reference rate_k "
                                                              "(TensorRT-LLM: 0.95)", rich_help_panel=GATE)] = None,
    speed_min_change: Annotated[float, typer.Option("--speed-min-change", help="speed: smallest change (%) "
                                                    "called a regression", rich_help_panel=GATE)] = 5.0,
    logprobs_atol: Annotated[Optional[float], typer.Option("--logprobs-atol", help="logprobs: allowed |diff| per "
                                                           "token, nats (default: 0.002 for an fp32 engine, 0.3 "
                                                           "for 16-bit engines and servers)",
                                                           rich_help_panel=GATE)] = None,
    logprobs_ppl_rtol: Annotated[Optional[float], typer.Option("--logprobs-ppl-rtol", help="logprobs: allowed "
                                                               "|ppl/ppl_ref - 1| per prompt (default: 0.001 fp32, "
                                                               "0.02 otherwise)", rich_help_panel=GATE)] = None,
    logprobs_off_fraction: Annotated[float, typer.Option("--logprobs-off-fraction", help="logprobs: fraction of "
                                                         "compared tokens allowed beyond --logprobs-atol",
                                                         rich_help_panel=GATE)] = 0.01,
    repeats: Annotated[int, typer.Option("--repeats", help="runs of each cell (speed needs >= 2 on both sides)",
                                         rich_help_panel=GATE)] = 1,
    workload: Annotated[str, typer.Option("--workload", "-w", help="gsm8k (accuracy is scored on gsm8k only)",
                                          rich_help_panel=o.WORKLOAD)] = "gsm8k",
    data_dir: DataDir = None,
    limit: Annotated[int, typer.Option("--num-prompts", "--limit", "-n", help="first N samples",
                                       rich_help_panel=o.WORKLOAD)] = 20,
    shots: Annotated[Optional[int], typer.Option("--shots", help="gsm8k few-shot examples",
                                                 rich_help_panel=o.WORKLOAD)] = None,
    max_tokens: Annotated[Optional[int], typer.Option("--max-tokens", rich_help_panel=o.WORKLOAD)] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", rich_help_panel=o.LOAD)] = 1,
    results_dir: Annotated[Optional[str], typer.Option("--results-dir", help="where the gate's sweep run goes "
                                                       "(default: a new temporary directory)",
                                                       rich_help_panel=o.OUTPUT)] = None,
    base_url: Annotated[Optional[str], typer.Option("--base-url", help="gate this OpenAI-compatible server (its k "
                                                    "is fixed: the k = 0 outputs come from --reference)",
                                                    rich_help_panel=o.SERVER)] = None,
    server_model: sweep_option("server_model") = None,  # --model, as in sweep
    server_model_alias: Annotated[Optional[str], typer.Option("--server-model", hidden=True,
                                                              help="old name of --model")] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="variable holding the API key",
                                                       rich_help_panel=o.SERVER)] = None,
    request_timeout: sweep_option("request_timeout") = deadlines.REQUEST_TIMEOUT_S,
    server_cmd: sweep_option("server_cmd") = None,
    server_baseline_cmd: sweep_option("server_baseline_cmd") = None,
    server_ready_timeout: sweep_option("server_ready_timeout") = deadlines.SERVER_READY_TIMEOUT_S,
    quiet: sweep_option("quiet") = False,
    engine: dict = None,  # the shared engine option group (options.engine_options)
    fault: object = None,  # --inject (options.engine_options): the fault applied to the engine, or None
) -> None:
    """Lossless greedy, logprobs (top-n and prompt perplexity vs k = 0), accuracy, acceptance per position, speed and crash/empty/truncated outputs in one run:
    exit 0 when no stage fails, 1 when one does (the report names it), 3 when judging a stage crashed inside specbench
    (the report is still written and names it), 2 on a user error."""
    import tempfile
    from pathlib import Path

    from specbench.config import EngineConfig
    from specbench.errors import SpecbenchError
    from specbench.gate.report import check_output_path, to_junit, to_markdown, write_text
    from specbench.gate.runner import GateRequest, run_gate
    from specbench.gate.stage import check_requested, parse_skip
    from specbench.gate.tolerances import Tolerances
    from specbench.runs.sweep_config import SweepConfig, default_method

    for flag, path in (("--write-reference", write_reference), ("--report-md", report_md), ("--junit", junit)):
        if path:
            check_output_path(path, flag)  # before the gate runs: not minutes later, with nothing written
    if base_url and server_cmd:
        raise SpecbenchError("--base-url gates a running server, --server-cmd launches one: pass one of them")
    is_server = bool(base_url or server_cmd)
    server_model = server_model or server_model_alias
    if ctx.get_parameter_source("method").name in ("DEFAULT", "DEFAULT_MAP"):
        engine = {**engine, "method": "none" if base_url else default_method(engine["draft"])}
    skipped = parse_skip(skip)
    chosen = tuple(s for s in check_requested(stages) if s not in skipped)
    tolerances = Tolerances(near_tie_margin, strict, accuracy_drop, acceptance_rtol=acceptance_rtol,
                            acceptance_alpha=acceptance_alpha, acceptance_floor=acceptance_floor,
                            speed_min_change=speed_min_change, logprobs_atol=logprobs_atol,
                            logprobs_ppl_rtol=logprobs_ppl_rtol, logprobs_off_fraction=logprobs_off_fraction)
    sweep = SweepConfig(workload=workload, data_dir=data_dir, limit=limit, shots=shots, max_tokens=max_tokens,
                        concurrency=(concurrency,), repeats=repeats, warmup=0,
                        backend="openai" if is_server else "embedded", base_url=base_url, server_model=server_model,
                        api_key_env=api_key_env, request_timeout=request_timeout, server_cmd=server_cmd,
                        server_baseline_cmd=server_baseline_cmd, server_ready_timeout=server_ready_timeout,
                        engine=EngineConfig(**engine), inject=None if fault is None else fault.name,
                        results_dir=results_dir or tempfile.mkdtemp(prefix="specbench-gate-"))
    report = run_gate(GateRequest(sweep, num_steps, chosen, tolerances,
                                  Path(reference) if reference else None,
                                  Path(write_reference) if write_reference else None, fault, quiet))
    markdown = to_markdown(report)
    print(markdown, end="")
    if report_md:
        write_text(report_md, markdown, "markdown report")
    if junit:
        write_text(junit, to_junit(report), "JUnit report")
    raise typer.Exit(report.exit_code)
