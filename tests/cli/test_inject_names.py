"""`--inject NAME`: an unknown name is one error listing the faults, on every command that runs an engine and in the
library, before any model is looked at; "none" and "" mean no fault. EngineConfig reads only those off spellings:
the fault catalog sits above it (tests/test_import_layers.py), so the name is resolved where hooks are built."""

from __future__ import annotations

import re

import pytest

from specbench.config import EngineConfig
from specbench.errors import SpecbenchError
from specbench.faults import FAULTS
from tests.support.cli_run import assert_one_clean_error, run_main

NOWHERE = "/nonexistent/specbench-model"  # reaching the model load with this is "everything before was fine"
UNKNOWN = "unknown fault 'no-such-fault'; supported: " + ", ".join(sorted(FAULTS))
ENGINE_COMMANDS = (("generate", "-p", "hi"), ("sweep",), ("gsm8k",), ("mtbench",), ("check",), ("serve",),
                   ("gate",))


@pytest.mark.parametrize("command", ENGINE_COMMANDS, ids=[c[0] for c in ENGINE_COMMANDS])
def test_an_unknown_fault_is_one_error_listing_the_faults(command):
    result = run_main(*command, "--target", NOWHERE, "--inject", "no-such-fault")
    line = assert_one_clean_error(result, UNKNOWN)
    assert NOWHERE not in line  # refused before any model was looked at


@pytest.mark.parametrize("off", ["none", ""])
def test_the_off_spellings_mean_no_fault(off):
    assert EngineConfig(inject=off).inject is None
    # the command goes on to the model load: the option was accepted as "no fault"
    assert_one_clean_error(run_main("generate", "-p", "hi", "--target", NOWHERE, "--inject", off), NOWHERE)


def test_the_library_refuses_an_unknown_fault_before_loading():
    config = EngineConfig(target=NOWHERE, inject="no-such-fault")  # a plain value until an engine is built
    assert config.inject == "no-such-fault"
    from specbench import LLM

    with pytest.raises(SpecbenchError, match=re.escape(UNKNOWN)):
        LLM(config)


def test_a_library_sweep_refuses_an_unknown_fault_before_reading_or_writing(tmp_path):
    """validate_config resolves the name with the other registries: before the data (absent here) is read."""
    from specbench.bench.sweep import run_sweep
    from specbench.runs.sweep_config import SweepConfig

    config = SweepConfig.from_flat({"target": NOWHERE, "inject": "no-such-fault", "results_dir": str(tmp_path / "r"),
                                    "data_dir": str(tmp_path / "no-data")})
    with pytest.raises(SpecbenchError, match=re.escape(UNKNOWN)):
        run_sweep(config)
    assert list(tmp_path.iterdir()) == []
