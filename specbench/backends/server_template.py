"""`--server-cmd` templates: placeholders filled per (method, num-steps, tree shape) group, and the presets."""

from __future__ import annotations

import shlex
import string
from dataclasses import dataclass

from specbench.backends.server_presets import (
    SERVER_PRESETS,
    LaunchPoint,
    max_tree_nodes,
)
from specbench.errors import SpecbenchError
from specbench.speculation.draft_shape import CHAIN, DraftShape

# {eagle_topk}: the group's --eagle-topk; {num_draft_tokens}: SGLang's --speculative-num-draft-tokens for it
# (drafted tokens per round plus the root: k + 1 for a chain).
PLACEHOLDERS = ("num_steps", "method", "port", "model", "draft", "host", "eagle_topk", "num_draft_tokens")
PRESET_PREFIX = "preset:"
LOOPBACK = "127.0.0.1"

# The presets (backends/server_presets.py): each builds its template per (method, num-steps, tree shape).
PRESETS: tuple[str, ...] = tuple(SERVER_PRESETS.supported())


@dataclass(frozen=True, slots=True)
class LaunchValues:
    num_steps: int
    method: str
    port: int
    model: str
    draft: str | None
    shape: DraftShape = CHAIN

    def fields(self) -> dict[str, str]:
        return {"num_steps": str(self.num_steps), "method": self.method, "port": str(self.port),
                "model": self.model, "draft": self.draft or "", "host": LOOPBACK,
                "eagle_topk": str(self.shape.eagle_topk),
                "num_draft_tokens": str(max_tree_nodes(self.num_steps, self.shape) + 1)}


def resolve_template(template: str, baseline: str | None, num_steps: int, method: str = "draft",
                     shape: DraftShape = CHAIN) -> str:
    """The template one group launches: a preset's, built for (method, num_steps, shape), else `baseline` for
    num-steps 0 when given. A preset refuses what its server cannot run (SpecbenchError, one line)."""
    if num_steps == 0 and baseline is not None:
        return baseline
    if template.startswith(PRESET_PREFIX):
        preset = SERVER_PRESETS.create(template[len(PRESET_PREFIX):])
        return preset.baseline if num_steps == 0 else preset.speculative(LaunchPoint(method, num_steps, shape))
    return template


def check_template(template: str, flag: str = "--server-cmd") -> None:
    """Unknown placeholders, bad braces and unbalanced quotes are refused before anything starts."""
    if template.startswith(PRESET_PREFIX):
        resolve_template(template, None, 1)
        return
    names = set().union(*(_placeholders(arg, flag) for arg in split_template(template, flag)))
    unknown = sorted(names - set(PLACEHOLDERS))
    if unknown:
        raise SpecbenchError(f"{flag}: unknown placeholder {{{unknown[0]}}}; supported: "
                             + ", ".join("{" + p + "}" for p in PLACEHOLDERS))
    if "port" not in names:
        raise SpecbenchError(f"{flag} must contain {{port}} (specbench picks a free loopback port per launch)")


def split_template(template: str, flag: str = "--server-cmd") -> tuple[str, ...]:
    """The template's arguments, split like a POSIX shell would (quotes group, no expansion)."""
    try:
        return tuple(shlex.split(template))
    except ValueError as err:
        raise SpecbenchError(f"{flag}: {err} in {template!r} (quote an argument with spaces as a whole)") from None


def render(template: str, values: LaunchValues, flag: str = "--server-cmd") -> tuple[str, ...]:
    """The argv of one launch (no shell). The template is split first and each placeholder filled inside its own
    argument, so a value with spaces or quotes stays one argument; a value that could pass for an option (a leading
    `-`), an empty one and one with control characters are refused."""
    fields = values.fields()
    args = split_template(template, flag)
    for name in sorted(set().union(*(_placeholders(arg, flag) for arg in args)) & set(fields)):
        _check_value(name, fields[name], flag)
    return tuple(arg.format_map(fields) for arg in args)


def _placeholders(arg: str, flag: str) -> set[str]:
    try:
        return {name for _, name, _, _ in string.Formatter().parse(arg) if name is not None}
    except ValueError as err:
        raise SpecbenchError(f"{flag}: {err} in argument {arg!r} (write {{{{ and }}}} for literal braces)") from None


_OPTION_OF = {"model": "--target", "draft": "--draft", "method": "--method"}


def _check_value(name: str, value: str, flag: str) -> None:
    given = f" (from {_OPTION_OF[name]})" if name in _OPTION_OF else ""
    if not value:
        raise SpecbenchError(f"{flag} uses {{{name}}}, which is empty{given}: give it or drop it from the template")
    if value.startswith("-"):
        raise SpecbenchError(f"{flag}: {{{name}}} = {value!r}{given} starts with '-' and would be read as an option "
                             "by the server; refused")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise SpecbenchError(f"{flag}: {{{name}}} = {value!r}{given} contains a control character; refused")
