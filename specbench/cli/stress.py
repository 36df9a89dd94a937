"""`specbench stress`: speculation on vs off over the conditions speculative bugs need (stress/); exit 0 when no
condition corrupts, 1 when one does (the report names the smallest), 2 on a user error."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from specbench.cli import options as o
from specbench.cli.sweep_options import sweep_option
from specbench.runs import deadlines
from specbench.runs.sweep_config import DEFAULT_HELP_METHOD

STRESS = "Stress"


@o.engine_options({"method": DEFAULT_HELP_METHOD, "device": "auto"})
def stress(
    ctx: typer.Context,
    num_steps: Annotated[int, typer.Option("--num-steps", "-k", help="k with speculation on (the widest the "
                                           "server runs: its verify is widest there)", rich_help_panel=STRESS)] = 3,
    rule: Annotated[str, typer.Option("--rule", help="output: greedy output must equal k = 0 request by request "
                                      "(deterministic engines); canary: canaries must not fail more often with "
                                      "speculation on (McNemar; 16-bit servers); auto: output for the embedded "
                                      "engine, else canary", rich_help_panel=STRESS)] = "auto",
    num_requests: Annotated[int, typer.Option("--num-requests", help="requests per condition (more where its "
                                              "concurrency needs more)", rich_help_panel=STRESS)] = 8,
    conditions: Annotated[Optional[str], typer.Option("--conditions", help="comma list of conditions to run "
                                                      "(default: the whole matrix; `hybrid`: the gentle one and "
                                                      "those reaching a recurrent state)",
                                                      rich_help_panel=STRESS)] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="tokens per answer",
                                            rich_help_panel=STRESS)] = 24,
    max_prompt_tokens: Annotated[Optional[int], typer.Option("--max-prompt-tokens", help="the longest prompt "
                                                             "(default: the engine's context; 2048 for a server)",
                                                             rich_help_panel=STRESS)] = None,
    window_tokens: Annotated[Optional[int], typer.Option("--window-tokens", help="the sliding window to go past "
                                                         "(default: the target's, when it has one)",
                                                         rich_help_panel=STRESS)] = None,
    chunk_tokens: Annotated[Optional[int], typer.Option("--chunk-tokens", help="the prefill chunk to go past",
                                                        rich_help_panel=STRESS)] = None,
    max_concurrency: Annotated[Optional[int], typer.Option("--max-concurrency", help="the saturating condition's "
                                                           "concurrency (default: 32 embedded, 16 for a server)",
                                                           rich_help_panel=STRESS)] = None,
    hybrid: Annotated[Optional[bool], typer.Option("--hybrid/--no-hybrid", help="the target carries recurrent "
                                                   "state (Qwen3-Next): its conditions say why (default: the engine "
                                                   "knows, a specbench server says in /version, else --target's "
                                                   "config.json)",
                                                   rich_help_panel=STRESS)] = None,
    report_md: Annotated[Optional[str], typer.Option("--report-md", help="also write the markdown report here",
                                                     rich_help_panel=STRESS)] = None,
    results_dir: Annotated[Optional[str], typer.Option("--results-dir", help="where launched servers' logs go "
                                                       "(default: a new temporary directory)",
                                                       rich_help_panel=o.OUTPUT)] = None,
    base_url: Annotated[Optional[str], typer.Option("--base-url", help="stress this running OpenAI-compatible "
                                                    "server (speculation on)", rich_help_panel=o.SERVER)] = None,
    baseline_url: Annotated[Optional[str], typer.Option("--baseline-url", help="the same model served without "
                                                        "speculation (with --base-url)",
                                                        rich_help_panel=o.SERVER)] = None,
    server_model: sweep_option("server_model") = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="variable holding the API key",
                                                       rich_help_panel=o.SERVER)] = None,
    request_timeout: sweep_option("request_timeout") = deadlines.REQUEST_TIMEOUT_S,
    server_cmd: sweep_option("server_cmd") = None,
    server_baseline_cmd: sweep_option("server_baseline_cmd") = None,
    server_ready_timeout: sweep_option("server_ready_timeout") = deadlines.SERVER_READY_TIMEOUT_S,
    quiet: sweep_option("quiet") = False,
    engine: dict = None,  # the shared engine option group (options.engine_options)
    fault: object = None,  # --inject: the fault applied to the embedded engine, or None
) -> None:
    """Drive the engine or server into the conditions speculative bugs need (concurrency 8, batch sizes between
    CUDA-graph captures, block edges, past the window and the chunk, long prompts, shared prefixes, a warm cache, a
    restart, zero-draft rounds) and compare its answers to canary prompts with speculation on and off."""
    import tempfile

    from specbench.config import EngineConfig
    from specbench.errors import SpecbenchError
    from specbench.gate.report import check_output_path, write_text
    from specbench.runs.sweep_config import SweepConfig, default_method
    from specbench.stress.report import to_markdown
    from specbench.stress.stage import StressRequest, run_stress

    if report_md:
        check_output_path(report_md, "--report-md")  # before the matrix runs, not minutes later
    if base_url and server_cmd:
        raise SpecbenchError("--base-url stresses a running server, --server-cmd launches one: pass one of them")
    if baseline_url and not base_url:
        raise SpecbenchError("--baseline-url is the speculation-off twin of a --base-url server")
    is_server = bool(base_url or server_cmd)
    if ctx.get_parameter_source("method").name in ("DEFAULT", "DEFAULT_MAP"):
        engine = {**engine, "method": "none" if base_url else default_method(engine["draft"])}
    sweep = SweepConfig(backend="openai" if is_server else "embedded", base_url=base_url, server_model=server_model,
                        api_key_env=api_key_env, request_timeout=request_timeout, server_cmd=server_cmd,
                        server_baseline_cmd=server_baseline_cmd, server_ready_timeout=server_ready_timeout,
                        engine=EngineConfig(**engine), inject=None if fault is None else fault.name,
                        results_dir=results_dir or tempfile.mkdtemp(prefix="specbench-stress-"), quiet=quiet)
    names = tuple(n.strip() for n in conditions.split(",") if n.strip()) if conditions else ()
    report = run_stress(StressRequest(
        sweep, num_steps, baseline_url=baseline_url, rule=rule, num_requests=num_requests, max_tokens=max_tokens,
        max_prompt_tokens=max_prompt_tokens, window_tokens=window_tokens, chunk_tokens=chunk_tokens,
        block_size=engine["block_size"] if is_server else None, max_concurrency=max_concurrency, conditions=names,
        seed=engine["seed"], fault=fault, hybrid=hybrid, quiet=quiet))  # --seed also draws the canaries
    markdown = to_markdown(report)
    print(markdown, end="")
    if report_md:
        write_text(report_md, markdown, "markdown report")
    raise typer.Exit(report.exit_code)
