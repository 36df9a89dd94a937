"""Options of commands that can launch the server they measure (sweep, gsm8k, mtbench, check-lossless)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from specbench.cli.options import SERVER

ServerCmd = Annotated[
    Optional[str],
    typer.Option("--server-cmd", rich_help_panel=SERVER,
                 help="openai: launch the server per num-steps group from this template "
                 "({num_steps} {method} {port} {model} {draft} {host}; no shell) or preset:NAME (llama-server, "
                 "llama-server-ngram, vllm, sglang, specbench); replaces --base-url"),
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
