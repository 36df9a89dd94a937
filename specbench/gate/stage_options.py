"""How a gate stage declares its options (its tolerances), once: a frozen dataclass of `tolerance(...)` fields,
each with its flag, help, default and allowed values, as EngineConfig's fields declare the engine options
(specbench/config.py `option`). The gate's `Tolerances` (gate/tolerances.py) and its command-line options
(cli/gate.py) are generated from every registered stage's declaration."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specbench.config import Allowed, option
from specbench.errors import SpecbenchError


def tolerance(default: Any, help: str | None, *, ok: Callable[[Any], bool] | None = None,
              need: str = "out of range", cli: bool = True) -> Any:
    """A stage option: `--<name-with-dashes>` on the gate's command line (cli=False: a constant of the rule, kept
    beside the options so the report can name it); `ok(value)` else SpecbenchError "--flag value: `need`"."""
    return option(default, help, cli=cli, bounds=None if ok is None else Allowed(ok, need))


@dataclass(frozen=True)
class StageOptions:
    """A stage's options (none here: a stage without tolerances declares this class itself)."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            bounds, value = f.metadata.get("bounds"), getattr(self, f.name)
            if bounds is not None and not bounds.ok(value):
                raise SpecbenchError(f"--{f.name.replace('_', '-')} {value}: {bounds.need}")
