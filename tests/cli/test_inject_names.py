"""`--inject NAME`: an unknown name is one error listing the faults, on every command that runs an engine and in the
catalog, before any model is looked at; "none" and "" mean no fault. The engine's options carry no fault: the
caller that builds an engine applies one (`specbench.faults.injection(name)` -> create_engine(config, fault))."""

from __future__ import annotations

import dataclasses
import re

import pytest

from specbench.config import EngineConfig
from specbench.errors import SpecbenchError
from specbench.faults import FAULTS, injection
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
    assert injection(off) is None
    # the command goes on to the model load: the option was accepted as "no fault"
    assert_one_clean_error(run_main("generate", "-p", "hi", "--target", NOWHERE, "--inject", off), NOWHERE)


def test_the_catalog_refuses_an_unknown_fault_and_the_engine_options_name_none():
    with pytest.raises(SpecbenchError, match=re.escape(UNKNOWN)):
        injection("no-such-fault")
    assert "inject" not in {f.name for f in dataclasses.fields(EngineConfig)}


@pytest.mark.parametrize("name", ["no-such-fault", "draft-kv-slice"])
def test_a_library_sweep_recording_a_fault_its_engine_lacks_is_refused_before_reading_or_writing(tmp_path, name):
    """A run that records a fault must get that fault's engine from its caller (run_sweep's `fault`)."""
    from specbench.bench.sweep import run_sweep
    from specbench.runs.sweep_config import SweepConfig

    config = SweepConfig.from_flat({"target": NOWHERE, "inject": name, "results_dir": str(tmp_path / "r"),
                                    "data_dir": str(tmp_path / "no-data")})
    with pytest.raises(SpecbenchError, match=re.escape(f"pass --inject {name}")):
        run_sweep(config)
    assert list(tmp_path.iterdir()) == []
