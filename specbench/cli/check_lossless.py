"""`specbench check-lossless`: greedy outputs of a speculative server must equal a reference server's."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from specbench.backends.near_tie import NEAR_TIE_MARGIN
from specbench.cli.sweep_options import DataDir, sweep_option
from specbench.errors import SpecbenchError
from specbench.runs import deadlines


def check_lossless(
    base_url_spec: Annotated[Optional[str], typer.Option("--base-url-spec", help="speculative server root")] = None,
    base_url_ref: Annotated[Optional[str], typer.Option("--base-url-ref", help="reference (non-speculative) server "
                                                        "root")] = None,
    model_spec: Annotated[Optional[str], typer.Option("--model-spec", help="model on the speculative server "
                                                      "(default: its first /v1/models entry)")] = None,
    model_ref: Annotated[Optional[str], typer.Option("--model-ref", help="model on the reference server")] = None,
    workload: Annotated[str, typer.Option("--workload", "-w", help="gsm8k | mt_bench | spec_bench")] = "gsm8k",
    data_dir: DataDir = None,
    limit: Annotated[Optional[int], typer.Option("--num-prompts", "--limit", "-n", help="first N samples")] = 20,
    shots: Annotated[Optional[int], typer.Option("--shots", help="gsm8k few-shot examples")] = None,
    chat_template: Annotated[Optional[bool], typer.Option("--chat-template/--no-chat-template")] = None,
    max_tokens: Annotated[Optional[int], typer.Option("--max-tokens")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c")] = 1,
    tokenizer: Annotated[Optional[str], typer.Option("--tokenizer", help="local tokenizer (optional)")] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="environment variable holding the "
                                                       "API key of both servers")] = None,
    request_timeout: sweep_option("request_timeout") = deadlines.REQUEST_TIMEOUT_S,
    show: Annotated[int, typer.Option("--show", help="mismatches to print")] = 5,
    near_tie_margin: Annotated[float, typer.Option("--near-tie-margin", help="a mismatch whose top-2 logprob margin "
                                                   "(reference server, first divergent token) is below this many "
                                                   "nats is a near-tie")] = NEAR_TIE_MARGIN,
    strict: Annotated[bool, typer.Option("--strict", help="near-ties fail too")] = False,
    server_cmd: sweep_option("server_cmd") = None,
    server_baseline_cmd: sweep_option("server_baseline_cmd") = None,
    server_ready_timeout: sweep_option("server_ready_timeout") = deadlines.SERVER_READY_TIMEOUT_S,
    server_log_dir: Annotated[Optional[str], typer.Option("--server-log-dir", help="--server-cmd: where the two "
                                                          "servers' logs go (default: a new temporary directory)")
                              ] = None,
    target: Annotated[str, typer.Option("--target", help="--server-cmd: {model}")] = "default",
    draft: Annotated[Optional[str], typer.Option("--draft", help="--server-cmd: {draft}")] = None,
    method: Annotated[str, typer.Option("--method", help="--server-cmd: {method}")] = "draft",
    num_steps: Annotated[int, typer.Option("--num-steps", "-k", help="--server-cmd: k of the speculative server "
                                           "(the reference runs k = 0)")] = 3,
    quiet: sweep_option("quiet") = False,
) -> None:
    """Exit 0 when every greedy turn is identical on both servers or differs only by near-tied argmaxes (--strict:
    identical), 1 on a divergent or unclassified mismatch or a failed request."""
    from specbench.bench.lossless import check_lossless as run_check
    from specbench.bench.lossless import format_lossless
    from specbench.config import EngineConfig
    from specbench.runs.phase_progress import PhaseProgress
    from specbench.runs.sweep_config import SweepConfig

    progress = PhaseProgress("check-lossless", 2, quiet=quiet)

    def side(url: str, model: str | None) -> SweepConfig:
        return SweepConfig(workload=workload, data_dir=data_dir, limit=limit, shots=shots, chat_template=chat_template,
                           max_tokens=max_tokens, concurrency=(concurrency,), backend="openai", base_url=url,
                           server_model=model, api_key_env=api_key_env, request_timeout=request_timeout,
                           engine=EngineConfig(tokenizer=tokenizer), warmup=0, quiet=True)

    if server_cmd is not None:
        import dataclasses
        import tempfile
        from pathlib import Path

        from specbench.bench.lossless import check_lossless_launched

        if base_url_spec or base_url_ref:
            raise SpecbenchError("--server-cmd launches both servers: drop --base-url-spec/--base-url-ref")
        logs = Path(server_log_dir or tempfile.mkdtemp(prefix="specbench-lossless-"))
        config = dataclasses.replace(side(None, model_spec), server_cmd=server_cmd, server_ready_timeout=
                                     server_ready_timeout, server_baseline_cmd=server_baseline_cmd,
                                     engine=EngineConfig(target=target, draft=draft, method=method,
                                                         tokenizer=tokenizer),
                                     num_steps=(num_steps,), speedup=False)
        report = check_lossless_launched(config, logs, near_tie_margin, progress)
        print(f"server logs: {logs}")
    elif not (base_url_spec and base_url_ref):
        raise SpecbenchError("check-lossless needs --base-url-spec and --base-url-ref, or --server-cmd")
    else:
        report = run_check(side(base_url_spec, model_spec), side(base_url_ref, model_ref), near_tie_margin, progress)
    print(format_lossless(report, show))
    if not report.result.passes(strict):
        raise typer.Exit(1)
