"""Options of commands that can launch the server they measure (sweep, gsm8k, mtbench, check-lossless)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from specbench.cli.options import SERVER

ServerCmd = Annotated[
    Optional[str],
    typer.Option("--server-cmd", rich_help_panel=SERVER,
                 help="openai: launch the server per num-steps group from this template "
                 "({num_steps} {method} {port} {model} {draft} {host}) or preset:NAME (llama-server, "
                 "llama-server-ngram, vllm, sglang, specbench); replaces --base-url. No shell: the template is split "
                 "into arguments like a shell would (quote an argument with spaces), then each placeholder is filled "
                 "inside its argument, so a value with spaces stays one argument; a value starting with '-', an "
                 "empty one or an unbalanced quote is refused"),
]
ServerBaselineCmd = Annotated[
    Optional[str],
    typer.Option("--server-baseline-cmd", rich_help_panel=SERVER,
                 help="template for the num-steps 0 server (default: the preset's "
                 "non-speculative one, else --server-cmd)"),
]
ServerAdapter = Annotated[
    str,
    typer.Option("--server-adapter", rich_help_panel=SERVER,
                 help="whose /metrics and response fields to read: auto (detected from "
                 "/metrics, /version, /props) | vllm | sglang | llamacpp | specbench"),
]
ServerReadyTimeout = Annotated[
    float, typer.Option("--server-ready-timeout", rich_help_panel=SERVER,
                 help="seconds a launched server may take to become ready")
]
# Deadlines on whole calls, connect to last byte (defaults in runs/deadlines.py); recorded in the manifest's config.
RequestTimeout = Annotated[
    float, typer.Option("--request-timeout", rich_help_panel=SERVER,
                              help="openai: seconds one streamed request may take, connect to last byte")
]
InfoTimeout = Annotated[
    float, typer.Option("--info-timeout", rich_help_panel=SERVER,
                              help="openai: seconds each of /v1/models, /version, /props may take")
]
MetricsTimeout = Annotated[
    float, typer.Option("--metrics-timeout", rich_help_panel=SERVER,
                              help="openai: seconds one /metrics scrape may take (two per cell)")
]
CacheResetTimeout = Annotated[
    float, typer.Option("--cache-reset-timeout", rich_help_panel=SERVER,
                              help="openai: seconds one prefix-cache reset may take")
]
