"""`specbench gate`: one CI command, one exit code (0 pass, 1 a stage failed, 2 user error, 3 crashed), one report."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from specbench.cli import options as o
from specbench.cli.option_group import OptionGroup
from specbench.cli.sweep_options import DataDir, sweep_option
from specbench.gate.stages import STAGES
from specbench.gate.tolerances import CLI_NAMES, Tolerances
from specbench.runs import deadlines
from specbench.runs.sweep_config import DEFAULT_HELP_METHOD

GATE = "Gate"
# Each stage's tolerances, as its options declare them (gate/stages.py): generated, never written here.
TOLERANCE_GROUP = OptionGroup(Tolerances, CLI_NAMES, dict.fromkeys(CLI_NAMES, GATE))


@o.engine_options({"method": DEFAULT_HELP_METHOD, "device": "auto"})
@o.group_options(TOLERANCE_GROUP, "tolerances", after="junit")
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
    skip: Annotated[Optional[str], typer.Option("--skip", help="comma list of stages not to run: "
                                                + ", ".join(STAGES), rich_help_panel=GATE)] = None,
    report_md: Annotated[Optional[str], typer.Option("--report-md", help="also write the markdown report here",
                                                     rich_help_panel=GATE)] = None,
    junit: Annotated[Optional[str], typer.Option("--junit", help="write JUnit XML here (one testcase per stage)",
                                                 rich_help_panel=GATE)] = None,
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
    reasoning_parser: sweep_option("reasoning_parser") = None,
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
    tolerances: dict = None,  # every stage's tolerance options (TOLERANCE_GROUP)
    engine: dict = None,  # the shared engine option group (options.engine_options)
    fault: object = None,  # --inject (options.engine_options): the fault applied to the engine, or None
) -> None:
    """Lossless greedy, logprobs (top-n and prompt perplexity vs k = 0), accuracy, acceptance per position, speed and crash/empty/truncated outputs in one run:
    exit 0 when no stage fails, 1 when one does (the report names it), 3 when judging a stage crashed inside specbench
    (the report is still written and names it), 2 on a user error."""
    import tempfile
    from pathlib import Path

    from specbench.backends.reasoning import REASONING_PARSERS
    from specbench.config import EngineConfig
    from specbench.errors import SpecbenchError
    from specbench.gate.report import check_output_path, to_junit, to_markdown, write_text
    from specbench.gate.runner import GateRequest, run_gate
    from specbench.gate.stages import check_requested, parse_skip
    from specbench.runs.sweep_config import SweepConfig, default_method

    for flag, path in (("--write-reference", write_reference), ("--report-md", report_md), ("--junit", junit)):
        if path:
            check_output_path(path, flag)  # before the gate runs: not minutes later, with nothing written
    if base_url and server_cmd:
        raise SpecbenchError("--base-url gates a running server, --server-cmd launches one: pass one of them")
    is_server = bool(base_url or server_cmd)
    if reasoning_parser is not None and reasoning_parser not in REASONING_PARSERS:
        raise SpecbenchError(f"--reasoning-parser must be one of {', '.join(REASONING_PARSERS)}, "
                             f"got {reasoning_parser!r}")
    server_model = server_model or server_model_alias
    if ctx.get_parameter_source("method").name in ("DEFAULT", "DEFAULT_MAP"):
        engine = {**engine, "method": "none" if base_url else default_method(engine["draft"])}
    skipped = parse_skip(skip)
    chosen = tuple(s for s in check_requested(stages) if s not in skipped)
    sweep = SweepConfig(workload=workload, data_dir=data_dir, limit=limit, shots=shots, max_tokens=max_tokens,
                        concurrency=(concurrency,), repeats=repeats, warmup=0,
                        backend="openai" if is_server else "embedded", base_url=base_url, server_model=server_model,
                        api_key_env=api_key_env, request_timeout=request_timeout, server_cmd=server_cmd,
                        server_baseline_cmd=server_baseline_cmd, server_ready_timeout=server_ready_timeout,
                        engine=EngineConfig(**engine), inject=None if fault is None else fault.name,
                        reasoning_parser=reasoning_parser,
                        results_dir=results_dir or tempfile.mkdtemp(prefix="specbench-gate-"))
    report = run_gate(GateRequest(sweep, num_steps, chosen, Tolerances(**tolerances),
                                  Path(reference) if reference else None,
                                  Path(write_reference) if write_reference else None, fault, quiet))
    markdown = to_markdown(report)
    print(markdown, end="")
    if report_md:
        write_text(report_md, markdown, "markdown report")
    if junit:
        write_text(junit, to_junit(report), "JUnit report")
    raise typer.Exit(report.exit_code)
