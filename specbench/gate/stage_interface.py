"""What a gate stage is (`Stage`) and what the gate hands each stage to judge (`StageInputs`).

A stage has a name (its row in the report), its options (`options`: a StageOptions dataclass, gate/stage_options.py,
from which the gate's Tolerances and command-line options are generated) and one method,
`judge(inputs) -> StageResult`, which reads what it needs of the inputs. A stage lives in one module
(gate/<name>_stage.py: its options, its rule, its Stage); gate/stages.py lists the stages in the order they run and
the runner looks a stage up there by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from specbench.backends.near_tie import TieDiagnosis
from specbench.gate.stage_options import StageOptions

if TYPE_CHECKING:
    from specbench.runtime.hooks import EngineFault
    from specbench.gate.logprobs_collect import LogprobsRun
    from specbench.gate.observed import Observation
    from specbench.gate.reference import GateReference
    from specbench.gate.stage import StageResult
    from specbench.runs.sweep_config import SweepConfig

# The near-tie probe: (sample_id, turn, k = 0 text, k text) -> diagnosis at the first divergent character
Probe = Callable[[str, int, str, str], TieDiagnosis]
Options = TypeVar("Options", bound=StageOptions)


@dataclass(frozen=True)
class LogprobsSides:
    now: LogprobsRun  # at k
    baseline: LogprobsRun | None  # k = 0 of this run; None where the gate does not control k (--base-url)


@dataclass(frozen=True)
class StageInputs:
    """Everything the gate collected before judging; each stage reads its part."""

    observation: Observation  # the run read back (gate/observed.py)
    reference: GateReference | None  # the --reference file; None without one
    tolerances: StageOptions  # every stage's options (gate/tolerances.py Tolerances); a stage reads its own: options()
    sweep: SweepConfig  # the gate's sweep as requested (backend, engine or server, workload)
    num_steps: int  # k gated
    probe: Probe | None = None  # the near-tie probe (lossless; collected only when that stage runs)
    logprobs: LogprobsSides | None = None  # logprobs at k and k = 0 (collected only when the logprobs stage runs)
    fault: EngineFault | None = None  # the gate's --inject, for a stage that builds engines of its own (stress)

    def options(self, kind: type[Options]) -> Options:
        """This stage's options: the gate's Tolerances derives from every stage's options class."""
        if not isinstance(self.tolerances, kind):
            raise TypeError(f"the gate's tolerances carry no {kind.__name__} (is its stage in gate/stages.py?)")
        return self.tolerances


class Stage(Protocol):
    name: str  # its row in the report, its --stages / --skip name
    options: type[StageOptions]  # its options, declared once

    def judge(self, inputs: StageInputs) -> StageResult:
        """This stage's verdict; an exception other than SpecbenchError is a bug (the runner reports it as CRASH)."""
        ...
