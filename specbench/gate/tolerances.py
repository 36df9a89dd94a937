"""Every threshold a gate stage applies, one value each (the CLI's options, the report's 'tolerance' column):
`Tolerances` is generated from the options each stage declares (gate/stages.py, gate/stage_options.py), one frozen
dataclass that is each stage's options at once (a stage reads its own: StageInputs.options)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from specbench.gate.stage_options import StageOptions
from specbench.gate.stages import STAGE_TYPES


def _options_types() -> tuple[type[StageOptions], ...]:
    """Each stage's options class once, in stage order (an options class may serve two stages)."""
    seen: list[type[StageOptions]] = []
    for stage in STAGE_TYPES:
        if stage.options not in seen and stage.options is not StageOptions:
            seen.append(stage.options)
    return tuple(seen)


OPTIONS_TYPES = _options_types()
# A dataclass collects fields from its bases last to first: reversed, its fields run in stage order. Frozen, with
# every field defaulted; StageOptions' __post_init__ checks every field's bounds.
Tolerances = dataclass(frozen=True)(type("Tolerances", tuple(reversed(OPTIONS_TYPES)), {
    "__module__": __name__, "__doc__": "Every stage's options at once (fields in stage order); Tolerances() is every "
                                       "default."}))
# The tolerances set on the gate's command line, in stage order.
CLI_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Tolerances) if f.metadata["cli"])
