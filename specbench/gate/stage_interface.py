"""What a gate stage is (`Stage`) and what the gate hands each stage to judge (`StageInputs`).

A stage has a name (one of stage.STAGES, the order stages run in) and one method, `judge(inputs) -> StageResult`,
which reads what it needs of the inputs. The runner looks a stage up by name in its registry (gate/runner.py,
GATE_STAGES); each stage's rule stays in its own module (gate/<name>_stage.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from specbench.gate.logprobs_collect import LogprobsRun
    from specbench.gate.lossless_stage import Probe
    from specbench.gate.observed import Observation
    from specbench.gate.reference import GateReference
    from specbench.gate.stage import StageResult
    from specbench.gate.tolerances import Tolerances
    from specbench.runs.sweep_config import SweepConfig


@dataclass(frozen=True)
class LogprobsSides:
    now: LogprobsRun  # at k
    baseline: LogprobsRun | None  # k = 0 of this run; None where the gate does not control k (--base-url)


@dataclass(frozen=True)
class StageInputs:
    """Everything the gate collected before judging; each stage reads its part."""

    observation: Observation  # the run read back (gate/observed.py)
    reference: GateReference | None  # the --reference file; None without one
    tolerances: Tolerances
    sweep: SweepConfig  # the gate's sweep as requested (backend, engine or server, workload)
    num_steps: int  # k gated
    probe: Probe | None = None  # the near-tie probe (lossless; collected only when that stage runs)
    logprobs: LogprobsSides | None = None  # logprobs at k and k = 0 (collected only when the logprobs stage runs)


class Stage(Protocol):
    name: str  # one of stage.STAGES

    def judge(self, inputs: StageInputs) -> StageResult:
        """This stage's verdict; an exception other than SpecbenchError is a bug (the runner reports it as CRASH)."""
        ...
