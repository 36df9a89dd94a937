"""Issue 24: the default warmup is one request per slot but capped (-c 100000 must not run 100000 unmeasured
requests first); an explicit --warmup above its bound is one error line; the manifest records what ran."""

from __future__ import annotations

import sys

import pytest

from specbench.bench.validate import validate_config
from specbench.errors import SpecbenchError
from specbench.runs.sweep_config import DEFAULT_MAX_WARMUP, MAX_WARMUP, SweepConfig


def test_default_warmup_is_one_per_slot_up_to_the_cap():
    config = SweepConfig()
    assert [config.num_warmup(c) for c in (1, 2, DEFAULT_MAX_WARMUP)] == [1, 2, DEFAULT_MAX_WARMUP]
    assert config.num_warmup(100_000) == DEFAULT_MAX_WARMUP
    explicit = SweepConfig(warmup=MAX_WARMUP)
    assert explicit.num_warmup(1) == MAX_WARMUP and SweepConfig(warmup=0).num_warmup(100_000) == 0


@pytest.mark.parametrize("warmup", [MAX_WARMUP + 1, -1])
def test_an_out_of_bounds_warmup_is_refused(warmup):
    with pytest.raises(SpecbenchError, match=rf"--warmup must be in \[0, {MAX_WARMUP}\], got {warmup}"):
        validate_config(SweepConfig(warmup=warmup))


def test_the_cli_refuses_a_huge_warmup_in_one_line(monkeypatch, capsys, tmp_path):
    from specbench.cli.app import main

    monkeypatch.setattr(sys, "argv", ["specbench", "sweep", "--target", str(tmp_path / "absent"), "-c", "100000",
                                      "--warmup", "100000", "--results-dir", str(tmp_path / "r")])
    with pytest.raises(SystemExit) as exc:
        main()
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err == f"error: --warmup must be in [0, {MAX_WARMUP}], got 100000\n"
    assert not (tmp_path / "r").exists()
