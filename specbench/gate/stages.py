"""The gate's stages, in the order they run: one line per stage. A stage is one module (gate/<name>_stage.py: its
options, its rule, its Stage class); listing it here gives it a registry entry (`GATE_STAGES`), a report row, its
--stages / --skip name, its fields in the gate's Tolerances (gate/tolerances.py) and its command-line options
(cli/gate.py)."""

from __future__ import annotations

from specbench.errors import SpecbenchError
from specbench.gate.acceptance_stage import AcceptanceStage
from specbench.gate.accuracy_stage import AccuracyStage
from specbench.gate.logprobs_stage import LogprobsStage
from specbench.gate.lossless_stage import LosslessStage
from specbench.gate.outputs_stage import OutputsStage
from specbench.gate.speed_stage import SpeedStage
from specbench.gate.stage_interface import Stage
from specbench.gate.stress_stage import StressStage
from specbench.gate.structured_stage import StructuredStage
from specbench.registry import Registry

DEFAULT_STAGE_TYPES: tuple[type[Stage], ...] = (  # what runs without --stages
    LosslessStage,
    LogprobsStage,
    AccuracyStage,
    AcceptanceStage,
    SpeedStage,
    OutputsStage,
)
# Asked for by name only (--stages ...,stress): each runs minutes more than the rest together.
OPT_IN_STAGE_TYPES: tuple[type[Stage], ...] = (StressStage, StructuredStage)
STAGE_TYPES = DEFAULT_STAGE_TYPES + OPT_IN_STAGE_TYPES
STAGES: tuple[str, ...] = tuple(stage.name for stage in STAGE_TYPES)  # run in this order
DEFAULT_STAGES: tuple[str, ...] = tuple(stage.name for stage in DEFAULT_STAGE_TYPES)

# Name -> stage (the Stage protocol, gate/stage_interface.py); an unknown name fails listing the registered ones.
GATE_STAGES: Registry[Stage] = Registry("gate stage")
for _stage in STAGE_TYPES:
    GATE_STAGES.register(_stage.name)(_stage)


def parse_skip(text: str | None) -> frozenset[str]:
    """'speed,accuracy' -> the names; an unknown name fails listing the stages."""
    names = frozenset(n.strip() for n in (text or "").split(",") if n.strip())
    unknown = sorted(names - set(STAGES))
    if unknown:
        raise SpecbenchError(f"--skip {', '.join(unknown)}: unknown stage; stages: {', '.join(STAGES)}")
    return names


def check_requested(only: str | None) -> tuple[str, ...]:
    """--stages: the stages to run (default: DEFAULT_STAGES)."""
    if only is None:
        return DEFAULT_STAGES
    names = tuple(n.strip() for n in only.split(",") if n.strip())
    for name in names:
        if name not in STAGES:
            raise SpecbenchError(f"--stages {name}: unknown stage; stages: {', '.join(STAGES)}")
    return tuple(s for s in STAGES if s in names)


def listed(chosen: tuple[str, ...]) -> tuple[str, ...]:
    """The report's rows, in run order: every default stage (SKIP where not chosen) and each opt-in stage chosen."""
    return tuple(s for s in STAGES if s in DEFAULT_STAGES or s in chosen)
