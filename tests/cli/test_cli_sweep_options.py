"""The sweep's options are SweepConfig's fields: one option per field, the presets the same less --workload."""

from __future__ import annotations

import dataclasses

import typer.main

from specbench.cli.app import app
from specbench.cli.sweep_options import SWEEP_GROUP
from specbench.runs.sweep_config import SweepConfig


def _options(command: str) -> set[str]:
    return {p.name for p in typer.main.get_command(app).commands[command].params}


def test_every_sweep_config_field_is_one_sweep_option():
    # `engine` is its own group; a field declared cli=False (inject: the command's --inject) is no sweep option.
    fields = {f.name for f in dataclasses.fields(SweepConfig) if f.name != "engine" and f.metadata["cli"]}
    assert set(SWEEP_GROUP.names) == fields and len(SWEEP_GROUP.names) == len(fields)
    assert fields <= _options("sweep")


def test_presets_take_the_sweep_options_but_workload():
    for preset in ("gsm8k", "mtbench"):
        assert _options(preset) == _options("sweep") - {"workload"}


def test_a_comma_list_default_is_the_field_default_as_text():
    assert SWEEP_GROUP.default("concurrency") == "1" and SWEEP_GROUP.default("temperature") == "0"
    parsed = SWEEP_GROUP.parse({"concurrency": SWEEP_GROUP.default("concurrency"),
                                "temperature": SWEEP_GROUP.default("temperature")})
    assert parsed == {"concurrency": SweepConfig().concurrency, "temperature": SweepConfig().temperature}
