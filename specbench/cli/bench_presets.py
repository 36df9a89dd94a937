"""`specbench gsm8k` and `specbench mtbench`: `sweep` preset for one workload (same options, other defaults)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import typer

from specbench.cli.app import app
from specbench.cli.sweep import sweep
from specbench.workloads.gsm8k import MAX_TOKENS as GSM8K_MAX_TOKENS
from specbench.workloads.gsm8k import NUM_SHOTS as GSM8K_NUM_SHOTS


def preset(workload: str, defaults: dict[str, Any], doc: str) -> Callable[..., None]:
    """`sweep` without --workload and with other defaults (Typer reads options from the signature)."""
    base = inspect.signature(sweep, eval_str=True)
    unknown = set(defaults) - set(base.parameters)
    if unknown:
        raise ValueError(f"preset defaults for unknown options {sorted(unknown)}")
    parameters = [
        p.replace(default=defaults.get(p.name, p.default)) for p in base.parameters.values() if p.name != "workload"
    ]

    def command(ctx: typer.Context, **options: Any) -> None:
        ctx.meta["specbench.fixed"] = {"workload": workload}
        sweep(ctx, **options)

    command.__signature__ = base.replace(parameters=parameters)  # type: ignore[attr-defined]
    command.__doc__ = doc
    return command


app.command("gsm8k")(
    preset(
        "gsm8k",
        {"shots": GSM8K_NUM_SHOTS, "limit": 0},  # the accuracy command: the full test split
        f"GSM8K (lm-eval gsm8k v3: {GSM8K_NUM_SHOTS}-shot, greedy, {GSM8K_MAX_TOKENS} tokens) sweep; prints "
        "strict/flexible accuracy with its 95% interval.",
    )
)
app.command("mtbench")(
    preset(
        "mt_bench",
        {"temperature": "default", "limit": 0},
        "MT-Bench (80 questions x 2 turns, FastChat per-category temperatures unless --temperature) sweep; "
        "prints per-category acceptance.",
    )
)
