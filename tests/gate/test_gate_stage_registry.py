"""The gate finds its stages by name (gate/runner.py GATE_STAGES, the Stage protocol of gate/stage_interface.py):
every stage the gate runs is registered under its name, an unknown name fails listing the registered ones, and a stage
judged through the registry is its rule applied to its part of the inputs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from specbench.errors import SpecbenchError
from specbench.gate.observed import GreedyOutput, SpeedSamples
from specbench.gate.runner import GATE_STAGES
from specbench.gate.speed_stage import speed_stage
from specbench.gate.stage import ACCURACY, LOSSLESS, OUTPUTS, SPEED, STAGES, Status
from specbench.gate.stage_interface import StageInputs
from specbench.gate.tolerances import Tolerances
from specbench.runs.sweep_config import SweepConfig

T = Tolerances()


def _inputs(observation, reference=None) -> StageInputs:
    return StageInputs(observation, reference, T, SweepConfig(), num_steps=2)


def test_every_stage_is_registered_under_its_name():
    assert GATE_STAGES.supported() == sorted(STAGES)
    for name in STAGES:
        assert GATE_STAGES.create(name).name == name


def test_an_unknown_stage_fails_listing_the_registered_ones():
    with pytest.raises(SpecbenchError, match=r"unknown gate stage 'stress'; supported: " + ", ".join(sorted(STAGES))):
        GATE_STAGES.get("stress")


def test_a_stage_judges_its_part_of_the_inputs():
    outputs = (GreedyOutput("0", 0, "a b"),)
    observation = SimpleNamespace(baseline_outputs=outputs, spec_outputs=outputs, accuracy=None,
                                  speed=SpeedSamples((), ()), problems=(), num_requests=1)
    assert GATE_STAGES.create(LOSSLESS).judge(_inputs(observation)).status is Status.PASS
    assert GATE_STAGES.create(ACCURACY).judge(_inputs(observation)).status is Status.NOT_AVAILABLE
    assert GATE_STAGES.create(SPEED).judge(_inputs(observation)) == speed_stage(observation.speed, None, T, 2)
    assert GATE_STAGES.create(OUTPUTS).judge(_inputs(observation)).status is Status.PASS
