"""The gate finds its stages by name (gate/stages.py GATE_STAGES, the Stage protocol of gate/stage_interface.py):
every stage the gate runs is registered under its name, an unknown name fails listing the registered ones, and a stage
judged through the registry is its rule applied to its part of the inputs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from specbench.errors import SpecbenchError
from specbench.gate.observed import GreedyOutput, SpeedSamples
from specbench.gate.speed_stage import speed_stage
from specbench.gate.stage import ACCURACY, LOSSLESS, OUTPUTS, SPEED, Status
from specbench.gate.stage_interface import StageInputs
from specbench.gate.stages import GATE_STAGES, STAGE_TYPES, STAGES
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
    with pytest.raises(SpecbenchError, match=r"unknown gate stage 'grammar'; supported: " + ", ".join(sorted(STAGES))):
        GATE_STAGES.get("grammar")


def test_a_stage_judges_its_part_of_the_inputs():
    outputs = (GreedyOutput("0", 0, "a b"),)
    observation = SimpleNamespace(baseline_outputs=outputs, spec_outputs=outputs, accuracy=None,
                                  speed=SpeedSamples((), ()), problems=(), num_requests=1)
    assert GATE_STAGES.create(LOSSLESS).judge(_inputs(observation)).status is Status.PASS
    assert GATE_STAGES.create(ACCURACY).judge(_inputs(observation)).status is Status.NOT_AVAILABLE
    assert GATE_STAGES.create(SPEED).judge(_inputs(observation)) == speed_stage(observation.speed, None, T, 2)
    assert GATE_STAGES.create(OUTPUTS).judge(_inputs(observation)).status is Status.PASS


def test_every_stage_option_is_a_tolerance_and_a_gate_option():
    """A stage's options are declared once, on the stage (gate/stage_options.py): listing the stage in gate/stages.py
    puts them in Tolerances, checks their bounds and gives the gate its command-line options."""
    import dataclasses

    import typer.main

    from specbench.cli.app import app
    from specbench.gate.tolerances import CLI_NAMES

    tolerance_fields = {f.name for f in dataclasses.fields(Tolerances)}
    gate_options = {p.name for p in typer.main.get_command(app).commands["gate"].params}
    for stage in STAGE_TYPES:
        for f in dataclasses.fields(stage.options):
            assert f.name in tolerance_fields, f"{stage.name}: {f.name}"
            assert (f.name in gate_options) == f.metadata["cli"] == (f.name in CLI_NAMES), f"{stage.name}: {f.name}"
        assert isinstance(T, stage.options)  # what StageInputs.options hands each stage


def test_a_tolerance_out_of_bounds_names_its_flag():
    with pytest.raises(SpecbenchError, match=r"--acceptance-alpha 1: out of range"):
        Tolerances(acceptance_alpha=1)
    with pytest.raises(SpecbenchError, match=r"--acceptance-floor 0: must be in \(0, 1\]"):
        Tolerances(acceptance_floor=0)
