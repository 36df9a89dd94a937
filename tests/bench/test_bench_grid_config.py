"""Grid parsing and order, config validation and round trip, resume config merging."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from specbench.bench.grid import build_grid, run_groups
from specbench.bench.resume import resume_config
from specbench.bench.validate import validate_config
from specbench.config import EngineConfig
from specbench.errors import SpecbenchError
from specbench.runs.cell_key import CellKey
from specbench.runs.comma_lists import parse_int_list, parse_temperature_list
from specbench.runs.schema import SCHEMA_VERSION
from specbench.runs.sweep_config import SweepConfig

NGRAM = EngineConfig(method="ngram")


def test_parse_lists():
    assert parse_int_list("1, 16,64,16", "--concurrency") == (1, 16, 64)
    assert parse_temperature_list("0,0.7,default") == (0.0, 0.7, None)
    for bad, message in (("1,,2", "empty value"), ("1,x", "'x' is not an integer"), ("", "empty value")):
        with pytest.raises(SpecbenchError, match=message):
            parse_int_list(bad, "--concurrency")
    with pytest.raises(SpecbenchError, match="is not a number"):
        parse_temperature_list("0,hot")
    with pytest.raises(SpecbenchError, match="finite"):
        parse_temperature_list("inf")


def test_grid_runs_each_baseline_before_its_speculative_cells():
    config = SweepConfig(concurrency=(1, 4), temperature=(0.0, None), num_steps=(3, 1), engine=NGRAM, repeats=2)
    grid = build_grid(config)
    assert len(grid) == 2 * 2 * 2 * 3  # num_steps 0 added for speedup
    assert len({key.cell_id for key in grid}) == len(grid)
    position = {key: i for i, key in enumerate(grid)}
    assert all(position[key.baseline] <= position[key] for key in grid)
    assert grid[0].cell_id == "r0-t0-c1-k0" and grid[-1].cell_id == "r1-tdefault-c4-k1"  # odd repeat: k reversed
    assert math.isnan(CellKey(0, None, 1, 0).temperature_value)
    no_baseline = dataclasses.replace(config, speedup=False)
    assert {key.num_steps for key in build_grid(no_baseline)} == {1, 3}


def test_grid_alternates_k_order_between_repeats_and_groups_cells_for_drift_probes():
    config = SweepConfig(concurrency=(2,), num_steps=(1, 3, 5), engine=NGRAM, repeats=3)
    grid = build_grid(config)
    assert [[key.num_steps for key in group] for group in run_groups(grid)] == [[0, 1, 3, 5], [0, 5, 3, 1],
                                                                               [0, 1, 3, 5]]
    # ABAB: over two repeats every speculative k has the same mean position within its group
    positions = {k: [group.index(k) for group in ([key.num_steps for key in g] for g in run_groups(grid)[:2])]
                 for k in (1, 3, 5)}
    assert len({sum(p) for p in positions.values()}) == 1
    # a resumed session's missing cells group by (repeat, temperature, concurrency) only where consecutive
    todo = [key for key in grid if key.num_steps != 3 or key.repeat != 0]
    assert [len(group) for group in run_groups(todo)] == [3, 4, 4]
    launched = build_grid(dataclasses.replace(config, backend="openai", server_cmd="preset:vllm"))
    assert [key.num_steps for key in launched] == [0, 0, 0, 1, 1, 1, 3, 3, 3, 5, 5, 5]  # one launch per k


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"concurrency": (1, 0)}, "--concurrency must be >= 1, got 0"),
        ({"concurrency": ()}, "--concurrency needs at least one value"),
        ({"temperature": (-1.0,)}, "--temperature must be >= 0"),
        ({"num_steps": (2,)}, "needs a speculative --method"),
        ({"workload": "bogus"}, "unknown workload 'bogus'; supported: file:PATH, gsm8k, json_schema, mt_bench, random, spec_bench"),
        ({"method": "bogus"}, "unknown speculative method 'bogus'"),
        ({"request_rate": 0.0}, "--request-rate must be > 0"),
        ({"repeats": 0}, "--repeats must be >= 1"),
        ({"limit": 0}, "--limit must be >= 1"),
        ({"top_p": 1.5}, "--top-p must be in"),
        ({"run_id": "../escape"}, "--run-id"),
    ],
)
def test_validate_config_rejects(changes, message):
    with pytest.raises(SpecbenchError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate_config(SweepConfig.from_flat(changes))


def test_warmup_defaults_to_one_request_per_slot():
    assert SweepConfig().num_warmup(4) == 4
    assert SweepConfig(warmup=0).num_warmup(4) == 0 and SweepConfig(warmup=2).num_warmup(16) == 2


def test_config_round_trips_through_json():
    config = SweepConfig(concurrency=(1, 16), temperature=(0.0, None), num_steps=(0, 3), engine=NGRAM, label="x")
    stored = json.loads(json.dumps(config.to_dict()))
    assert stored["request_rate"] == "inf"
    assert SweepConfig.from_dict(stored) == config
    finite = dataclasses.replace(config, request_rate=2.5)
    assert SweepConfig.from_dict(json.loads(json.dumps(finite.to_dict()))) == finite


def _write_run(tmp_path, config: SweepConfig):
    run_dir = tmp_path / "results" / "run1"
    run_dir.mkdir(parents=True)
    (run_dir / "manifest.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION, "config": config.to_dict()}))
    return run_dir


def test_resume_takes_stored_config_and_refuses_explicit_differences(tmp_path):
    stored = SweepConfig(concurrency=(1, 4), engine=NGRAM, num_steps=(0, 3), label="before")
    run_dir = _write_run(tmp_path, stored)
    given = SweepConfig(resume=str(run_dir), quiet=True)  # everything else left at defaults
    merged, _ = resume_config(run_dir, given, explicit={"resume", "quiet"})
    assert merged.concurrency == (1, 4) and merged.label == "before" and merged.quiet
    assert merged.run_id == "run1" and merged.results_dir == str(run_dir.parent)

    same, _ = resume_config(run_dir, dataclasses.replace(stored, resume=str(run_dir)), explicit=None)
    assert same.identity() == stored.identity()
    with pytest.raises(SpecbenchError, match=r"config differs.*concurrency: run has \[1, 4\], given \[2\]"):
        resume_config(run_dir, dataclasses.replace(given, concurrency=(2,)), explicit={"concurrency"})


def test_resume_of_a_non_run_directory(tmp_path):
    with pytest.raises(SpecbenchError, match="not a specbench run directory"):
        resume_config(tmp_path, SweepConfig(), explicit=None)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(SpecbenchError, match="cannot read manifest.json"):
        resume_config(tmp_path, SweepConfig(), explicit=None)
