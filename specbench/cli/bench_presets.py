"""`specbench gsm8k` and `specbench mtbench`: `sweep` preset for one workload (same options, other defaults)."""

from __future__ import annotations

import copy
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any

import typer
from typer.models import OptionInfo

from specbench.cli.sweep import sweep
from specbench.workloads.gsm8k import MAX_TOKENS as GSM8K_MAX_TOKENS
from specbench.workloads.gsm8k import NUM_SHOTS as GSM8K_NUM_SHOTS


def preset(workload: str, defaults: dict[str, Any], doc: str, hidden: tuple[str, ...] = (),
           helps: dict[str, str] | None = None) -> Callable[..., None]:
    """`sweep` without --workload and with other defaults (Typer reads options from the signature); `hidden`: the
    sweep's options that do not apply to the workload (still accepted, as by sweep, never shown); `helps`: help
    texts for options whose sweep help describes another default."""
    base = inspect.signature(sweep, eval_str=True)
    helps = helps or {}
    unknown = (set(defaults) | set(hidden) | set(helps)) - set(base.parameters)
    if unknown:
        raise ValueError(f"preset defaults for unknown options {sorted(unknown)}")
    parameters = [
        _shown(p.replace(default=defaults.get(p.name, p.default)), p.name in hidden, helps.get(p.name))
        for p in base.parameters.values() if p.name != "workload"
    ]

    def command(ctx: typer.Context, **options: Any) -> None:
        ctx.meta["specbench.fixed"] = {"workload": workload}
        sweep(ctx, **options)

    command.__signature__ = base.replace(parameters=parameters)  # type: ignore[attr-defined]
    command.__doc__ = doc
    return command


def _shown(parameter: inspect.Parameter, hidden: bool, help_text: str | None) -> inspect.Parameter:
    """The parameter with its option hidden from --help or its help replaced (a copy: sweep keeps its own)."""
    if not hidden and help_text is None:
        return parameter
    hint, *extras = typing.get_args(parameter.annotation)
    info = next(e for e in extras if isinstance(e, OptionInfo))
    info = copy.copy(info)
    info.hidden = info.hidden or hidden
    info.help = help_text if help_text is not None else info.help
    return parameter.replace(annotation=Annotated[hint, info])


# Options of other workloads: --input-len/--output-len (random), --speed-bench-* (speed_bench).
OTHER_WORKLOADS = ("input_len", "output_len", "speed_bench_data", "speed_bench_split", "speed_bench_categories")
ALL_PROMPTS_HELP = "prompts per cell: the first N{how}; 0 = all"


gsm8k = preset(
    "gsm8k",
    {"shots": GSM8K_NUM_SHOTS, "limit": 0},  # the accuracy command: the full test split
    f"GSM8K (lm-eval gsm8k v3: {GSM8K_NUM_SHOTS}-shot, greedy, {GSM8K_MAX_TOKENS} tokens) sweep; prints "
    "strict/flexible accuracy with its 95% interval.",
    hidden=OTHER_WORKLOADS,
    helps={"limit": ALL_PROMPTS_HELP.format(how=" test questions"), "shots": "few-shot examples"},
)
mtbench = preset(
    "mt_bench",
    {"temperature": "default", "limit": 0},
    "MT-Bench (80 questions x 2 turns, FastChat per-category temperatures unless --temperature) sweep; "
    "prints acceptance and agreement per category and for its greedy and sampled requests apart.",
    hidden=(*OTHER_WORKLOADS, "shots"),
    helps={"limit": ALL_PROMPTS_HELP.format(how=" (a seeded sample across categories)")},
)
