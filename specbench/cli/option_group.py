"""A group of command-line options generated from a config dataclass whose fields declare them (`option(...)` in
specbench/config.py): flag and spellings, help, default, parse. Commands get one keyword parameter per field."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape

from specbench.config import FIELD_DEFAULT, field_default


@dataclass(frozen=True)
class OptionGroup:
    config: type  # the dataclass whose fields declare the options
    names: tuple[str, ...]  # its fields on the command line, in --help order
    panels: Mapping[str, str]  # field name -> --help panel

    def _field(self, name: str) -> dataclasses.Field:
        return next(f for f in dataclasses.fields(self.config) if f.name == name)

    def flag(self, name: str) -> str:
        return self._field(name).metadata["flag"] or "--" + name.replace("_", "-")

    def default(self, name: str) -> Any:
        """The command line's default: `cli_default`, else the field's (as option text where it has a `text`)."""
        f = self._field(name)
        meta = f.metadata
        if meta["cli_default"] is not FIELD_DEFAULT:
            return meta["cli_default"]
        default = field_default(f)
        return meta["text"](default) if meta["text"] is not None else default

    def annotation(self, name: str) -> Any:
        """One option as a Typer annotation (for a command that takes only that one, e.g. demo's --target)."""
        f = self._field(name)
        meta = f.metadata
        if meta["cli_type"] is not None:
            hint = meta["cli_type"]
        elif meta["parse"] is not None:  # tuples: the option takes a comma list
            hint = Optional[str]  # noqa: UP045 (typer reads the annotation)
        else:
            hint = typing.get_type_hints(self.config)[name]
        # help is printed through Rich markup: brackets escaped, or `specbench-cli[flashinfer]` loses `[flashinfer]`
        option = typer.Option(self.flag(name), *meta["aliases"], help=meta["help"] and escape(meta["help"]),
                              rich_help_panel=self.panels[name])
        return Annotated[hint, option]

    def parameters(self, defaults: Mapping[str, Any] | None = None) -> list[inspect.Parameter]:
        """One keyword parameter per option; `defaults` overrides the group's for one command."""
        defaults = defaults or {}
        unknown = set(defaults) - set(self.names)
        if unknown:
            raise ValueError(f"defaults for unknown {self.config.__name__} options {sorted(unknown)}")
        return [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=defaults.get(name, self.default(name)),
                              annotation=self.annotation(name))
            for name in self.names
        ]

    def parse(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """Option values -> field values (comma lists parsed), for the options present in `raw`."""
        out = {}
        for name in self.names:
            if name in raw:
                parse = self._field(name).metadata["parse"]
                out[name] = parse(raw[name]) if parse is not None else raw[name]
        return out
