"""The engine option group, generated from `EngineConfig`'s fields and shared by every command that loads models.

`engine_options(...)` appends one Typer option per CLI field of EngineConfig to a command's signature and hands
the command the parsed values as `engine: dict` (field name -> value): a new engine option is one field in
specbench/config.py, and every model-loading command gets it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any, Optional

import typer

from specbench.config import ENGINE_OPTION_NAMES, EngineConfig, field_default

_FIELDS = [f for f in dataclasses.fields(EngineConfig) if f.name in ENGINE_OPTION_NAMES]

# Help panels (`--help` groups options under these titles); every command's options name one.
MODEL, DRAFTING, WORKLOAD, LOAD, SERVER, OUTPUT, ENGINE = (
    "Model", "Drafting", "Workload", "Load", "Server (--backend openai)", "Output", "Engine tuning")
_ENGINE_PANELS = {
    **dict.fromkeys(("target", "dtype", "device", "load_format", "allow_pickle", "tokenizer", "seed"), MODEL),
    **dict.fromkeys(("method", "draft", "ngram_min", "ngram_max", "eagle_aux_layer_ids", "eagle_aux_convention",
                     "synthetic_acceptance", "inject"), DRAFTING),
}  # the rest: ENGINE


def _flag(f: dataclasses.Field) -> str:
    return f.metadata["flag"] or "--" + f.name.replace("_", "-")


# Not an engine option: where workloads read their data (gsm8k/, mt_bench/, spec_bench/).
DataDir = Annotated[
    Optional[str],
    typer.Option("--data-dir", rich_help_panel=WORKLOAD,
                 help="local data root (gsm8k/, mt_bench/, spec_bench/ in upstream formats); else "
                 "$SPECBENCH_DATA_DIR, else ../shared/data beside the current directory or the checkout, else the hub"),
]


def _option(f: dataclasses.Field) -> Any:
    return typer.Option(_flag(f), help=f.metadata["help"], rich_help_panel=_ENGINE_PANELS.get(f.name, ENGINE))


def _cli_type(f: dataclasses.Field, hint: Any) -> Any:
    if f.metadata["parse"] is not None:  # tuples: the option takes a comma list
        return Optional[str]
    return hint


def option_type(name: str) -> Any:
    """One engine option as a Typer annotation (for a command that takes only that one, e.g. demo's --target)."""
    f = next(f for f in _FIELDS if f.name == name)
    return Annotated[_cli_type(f, typing.get_type_hints(EngineConfig)[name]), _option(f)]


def engine_parameters(defaults: dict[str, Any] | None = None) -> list[inspect.Parameter]:
    """One keyword parameter per engine option; `defaults` overrides EngineConfig's for one command."""
    defaults = defaults or {}
    unknown = set(defaults) - set(ENGINE_OPTION_NAMES)
    if unknown:
        raise ValueError(f"defaults for unknown engine options {sorted(unknown)}")
    hints = typing.get_type_hints(EngineConfig)
    return [
        inspect.Parameter(
            f.name, inspect.Parameter.KEYWORD_ONLY,
            default=defaults.get(f.name, field_default(f)),
            annotation=Annotated[_cli_type(f, hints[f.name]), _option(f)],
        )
        for f in _FIELDS
    ]


def parse_engine_values(raw: dict[str, Any]) -> dict[str, Any]:
    """Option values -> EngineConfig field values (comma lists parsed)."""
    return {f.name: f.metadata["parse"](raw[f.name]) if f.metadata["parse"] else raw[f.name] for f in _FIELDS}


def engine_options(defaults: dict[str, Any] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command taking `engine: dict` (EngineConfig field values) with the shared option group."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name != "engine"]

        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            raw = {name: kwargs.pop(name) for name in ENGINE_OPTION_NAMES}
            return fn(*args, engine=parse_engine_values(raw), **kwargs)

        command.__signature__ = sig.replace(parameters=own + engine_parameters(defaults))  # type: ignore[attr-defined]
        return command

    return decorate
