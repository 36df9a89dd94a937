"""The engine option group, generated from `EngineConfig`'s fields and shared by every command that loads models.

`engine_options(...)` appends one Typer option per CLI field of EngineConfig to a command's signature and hands
the command the parsed values as `engine: dict` (field name -> value): a new engine option is one field in
specbench/config.py, and every model-loading command gets it. It appends `--inject` too (FaultChoice), handed to
the command as `fault`: the fault the command applies to the engine it builds (test machinery, never an engine
option). `group_options` does the same for any OptionGroup (the sweep's: cli/sweep_options.py).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specbench.cli.option_group import OptionGroup
from specbench.config import ENGINE_OPTION_NAMES, EngineConfig, option

if TYPE_CHECKING:
    from specbench.faults import Injection

# Help panels (`--help` groups options under these titles); every command's options name one.
MODEL, DRAFTING, WORKLOAD, LOAD, SERVER, OUTPUT, ENGINE = (
    "Model", "Drafting", "Workload", "Load", "Server (--backend openai)", "Output", "Engine tuning")
_ENGINE_PANELS = {
    **dict.fromkeys(("target", "dtype", "device", "load_format", "allow_pickle", "tokenizer", "seed"), MODEL),
    **dict.fromkeys(("method", "draft", "ngram_min", "ngram_max", "eagle_aux_layer_ids", "eagle_aux_convention",
                     "synthetic_acceptance"), DRAFTING),
}  # the rest: ENGINE
ENGINE_GROUP = OptionGroup(EngineConfig, ENGINE_OPTION_NAMES,
                           {name: _ENGINE_PANELS.get(name, ENGINE) for name in ENGINE_OPTION_NAMES})


@dataclass(frozen=True)
class FaultChoice:
    """`--inject`: which fault (specbench.faults) the command applies to the engine it builds; None = none."""

    inject: str | None = option(None, "engine fault to inject; marks the run a mutant (the faults: "
                                      "specbench selftest --help; faults/catalog.py)")


FAULT_GROUP = OptionGroup(FaultChoice, ("inject",), {"inject": DRAFTING})


def option_type(name: str) -> Any:
    """One engine option as a Typer annotation (for a command that takes only that one, e.g. demo's --target)."""
    return ENGINE_GROUP.annotation(name)


def engine_parameters(defaults: dict[str, Any] | None = None) -> list[inspect.Parameter]:
    """One keyword parameter per engine option; `defaults` overrides EngineConfig's for one command."""
    return ENGINE_GROUP.parameters(defaults)


def parse_fault(raw: dict[str, Any]) -> Injection | None:
    """--inject NAME -> the fault the command applies (None: none; "none" and "" too); an unknown name fails here,
    listing the faults, before any model is looked at."""
    if raw["inject"] is None:
        return None
    # The catalog imports torch: only when a fault is named.
    from specbench.faults import injection

    return injection(raw["inject"])


def parse_engine_values(raw: dict[str, Any]) -> dict[str, Any]:
    """Option values -> EngineConfig field values (comma lists parsed)."""
    values = ENGINE_GROUP.parse(raw)
    # An option left unset whose field computes its default (debug_invariants) gets it when the config is built.
    return {k: v for k, v in values.items() if v is not None or k not in _COMPUTED_DEFAULTS}


_COMPUTED_DEFAULTS = frozenset(
    f.name for f in dataclasses.fields(EngineConfig) if f.default_factory is not dataclasses.MISSING)


def group_options(group: OptionGroup, into: str, defaults: dict[str, Any] | None = None, *, first: bool = False,
                  after: str | None = None, parse: Callable[[dict[str, Any]], Any] | None = None
                  ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command taking `<into>: dict` (field values of the options given) with `group`'s options, after
    the command's own (`first`: before them, after its typer.Context; `after`: right after its option of that
    name); `parse`: option values -> field values (default: the group's own parsing)."""
    to_fields = parse or group.parse

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name != into]
        if after is not None:
            head = own[:[p.name for p in own].index(after) + 1]
        else:
            head = [p for p in own[:1] if p.name == "ctx"] if first else own

        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            raw = {name: kwargs.pop(name) for name in group.names if name in kwargs}
            return fn(*args, **{into: to_fields(raw)}, **kwargs)

        rest = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own[len(head):]]  # after keyword-only ones
        parameters = head + group.parameters(defaults) + rest
        command.__signature__ = sig.replace(parameters=parameters)  # type: ignore[attr-defined]
        return command

    return decorate


def engine_options(defaults: dict[str, Any] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command taking `engine: dict` (EngineConfig field values) and `fault` (parse_fault's) with the
    shared option group, then --inject (last of the Drafting panel, as before it left EngineConfig)."""
    with_engine = group_options(ENGINE_GROUP, "engine", defaults, parse=parse_engine_values)
    with_fault = group_options(FAULT_GROUP, "fault", parse=parse_fault)
    return lambda fn: with_fault(with_engine(fn))
