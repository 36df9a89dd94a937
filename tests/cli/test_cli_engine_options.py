"""Every model-loading command lists the same engine options, generated from EngineConfig's one declaration."""

from __future__ import annotations

import dataclasses
import re

import pytest
from typer.testing import CliRunner

from specbench.cli.app import app
from specbench.cli.options import ENGINE_OPTION_NAMES
from specbench.config import EngineConfig

MODEL_LOADING = ("generate", "sweep", "gsm8k", "mtbench", "check", "serve", "gate")


def _help_flags(command: str) -> set[str]:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "300"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", result.output))


def _engine_flags() -> set[str]:
    return {"--" + name.replace("_", "-") for name in ENGINE_OPTION_NAMES}


def test_the_group_is_every_cli_field_of_engine_config():
    cli_fields = [f.name for f in dataclasses.fields(EngineConfig) if f.metadata.get("cli")]
    assert list(ENGINE_OPTION_NAMES) == cli_fields and len(cli_fields) >= 20
    for flag in ("--attention-backend", "--verifier", "--synthetic-acceptance", "--enforce-eager"):
        assert flag in _engine_flags()
    assert "--inject" not in _engine_flags()  # a fault is applied by the command, never an engine option


@pytest.mark.parametrize("command", MODEL_LOADING)
def test_every_model_loading_command_lists_the_same_engine_options(command):
    flags = _help_flags(command)
    missing = _engine_flags() - flags
    assert not missing, f"{command} lacks {sorted(missing)}"
    # Options each command declares itself (the run's shape) are named alike too; --inject comes with the group.
    assert {"--num-steps", "--inject"} <= flags


def test_engine_option_values_reach_the_config():
    from specbench.cli.options import parse_engine_values

    raw = {f.name: f.default for f in dataclasses.fields(EngineConfig) if f.metadata.get("cli")}
    raw.update(synthetic_acceptance="0.7,0.5", eagle_aux_layer_ids="2, 5", method="ngram")
    config = EngineConfig(**parse_engine_values(raw), max_num_steps=2)
    assert config.synthetic_acceptance == (0.7, 0.5) and config.eagle_aux_layer_ids == (2, 5)

