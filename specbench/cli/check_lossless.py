"""`specbench check-lossless`: greedy outputs of a speculative server must equal a reference server's."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from specbench.cli import options as o
from specbench.cli.app import app


@app.command("check-lossless")
def check_lossless(
    base_url_spec: Annotated[str, typer.Option("--base-url-spec", help="speculative server root")],
    base_url_ref: Annotated[str, typer.Option("--base-url-ref", help="reference (non-speculative) server root")],
    model_spec: Annotated[Optional[str], typer.Option("--model-spec", help="model on the speculative server "
                                                      "(default: its first /v1/models entry)")] = None,
    model_ref: Annotated[Optional[str], typer.Option("--model-ref", help="model on the reference server")] = None,
    workload: Annotated[str, typer.Option("--workload", "-w", help="gsm8k | mt_bench | spec_bench")] = "gsm8k",
    data_dir: o.DataDir = None,
    limit: Annotated[Optional[int], typer.Option("--num-prompts", "--limit", "-n", help="first N samples")] = 20,
    shots: Annotated[Optional[int], typer.Option("--shots", help="gsm8k few-shot examples")] = None,
    chat_template: Annotated[Optional[bool], typer.Option("--chat-template/--no-chat-template")] = None,
    max_tokens: Annotated[Optional[int], typer.Option("--max-tokens")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c")] = 1,
    tokenizer: Annotated[Optional[str], typer.Option("--tokenizer", help="local tokenizer (optional)")] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="environment variable holding the "
                                                       "API key of both servers")] = None,
    request_timeout: Annotated[float, typer.Option("--request-timeout")] = 600.0,
    show: Annotated[int, typer.Option("--show", help="mismatches to print")] = 5,
) -> None:
    """Exit 0 when every greedy turn is identical on both servers, 1 on a mismatch or a failed request."""
    from specbench.backends.lossless import check_lossless as run_check
    from specbench.backends.lossless import format_lossless
    from specbench.bench.sweep_config import SweepConfig

    def side(url: str, model: str | None) -> SweepConfig:
        return SweepConfig(workload=workload, data_dir=data_dir, limit=limit, shots=shots, chat_template=chat_template,
                           max_tokens=max_tokens, concurrency=(concurrency,), backend="openai", base_url=url,
                           server_model=model, api_key_env=api_key_env, request_timeout=request_timeout,
                           tokenizer=tokenizer, warmup=0, quiet=True)

    report = run_check(side(base_url_spec, model_spec), side(base_url_ref, model_ref))
    print(format_lossless(report, show))
    if not report.is_lossless:
        raise typer.Exit(1)
