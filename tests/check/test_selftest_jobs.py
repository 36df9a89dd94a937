"""`selftest --jobs N` (selftest/parallel.py): rows in spawned worker processes give the sequential run's rows, in
its table order; a failing worker is one clear error; `--seeds` takes ranges; `--faults none` runs clean rows only."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from specbench.check.budget import BUDGETS
from specbench.errors import SpecbenchError
from specbench.runs.comma_lists import parse_int_ranges
from specbench.selftest.parallel import default_jobs, run_parallel
from specbench.selftest.row_tasks import SeedTask
from specbench.selftest.runner import PLAIN, run_selftest

# The fast budget's 2 prompts differ from the shipped baselines' 6: the baseline check is left out; `rows` needs no
# model and costs a second or two per row. Two seeds, so that a path mutant's seed choice (due_faults) is exercised.
CHECKS = ("greedy", "sampled", "oracle", "invariants", "metrics")
FAULTS = ("bonus-from-wrong-row", "draft-kv-slice", "overlap-stale-input", "window-off-by-one")


def _verdicts(rows) -> list[tuple]:
    """Everything a row says but the seconds it took."""
    return [(row.method, row.seed, row.target, row.inject, row.detected,
             [(r.name, r.passed, r.skipped, r.is_crashed, r.detail, r.note, r.paths) for r in row.results])
            for row in rows]


@pytest.mark.slow  # two spawned workers import torch and the engine: ~60 s on 2 busy cores
def test_jobs_2_gives_the_sequential_rows_in_table_order():
    kwargs = {"seeds": (0, 1), "methods": ("draft",), "faults": FAULTS, "checks": CHECKS, "budget": BUDGETS["fast"],
              "window_moe": True, "trees": False, "chunked": False, "constrained": False}
    # the tree, chunked and constrained rows' order: tests/check/test_selftest_trees.py, test_selftest_chunked.py,
    # test_selftest_constrained.py
    sequential = run_selftest(jobs=1, **kwargs)
    seen = []
    parallel = run_selftest(jobs=2, on_row=seen.append, **kwargs)
    assert _verdicts(parallel) == _verdicts(sequential)
    assert sorted(_verdicts(seen), key=repr) == sorted(_verdicts(sequential), key=repr)  # on_row: every row once
    # The window + MoE target's rows come last (seed 0 again); the window fault runs there only.
    assert [(r.method, r.seed, r.target, r.inject) for r in sequential] == [
        (PLAIN, 0, "", None), (PLAIN, 0, "", "overlap-stale-input"), ("draft", 0, "", None),
        ("draft", 0, "", "bonus-from-wrong-row"), ("draft", 0, "", "draft-kv-slice"), (PLAIN, 1, "", None),
        ("draft", 1, "", None), (PLAIN, 0, "window_moe", None), (PLAIN, 0, "window_moe", "window-off-by-one"),
        ("draft", 0, "window_moe", None), ("draft", 0, "window_moe", "window-off-by-one")]
    assert all(r.detected == (r.inject is not None) for r in sequential)


def test_a_failing_worker_is_one_clear_error(tmp_path):
    unwritable = tmp_path / "file"
    unwritable.write_text("")  # the seed's models cannot be written under a file
    task = SeedTask(str(unwritable), 0, ("draft",), 3, "cpu", None, ("greedy",), BUDGETS["fast"])
    with pytest.raises(SpecbenchError, match=r"selftest worker failed on seed 0 preparation: .*Error"):
        run_parallel([task], [], jobs=1)


def test_auto_jobs_use_the_cores_and_the_library_default_is_in_process():
    import os

    assert default_jobs("cpu") == max(1, min(8, os.cpu_count() or 1))  # tiny models run on one thread each
    with pytest.raises(SpecbenchError, match="at least 1"):
        run_selftest(jobs=0)


def test_seed_ranges_parse_in_one_place():
    assert parse_int_ranges("0-3", "--seeds") == (0, 1, 2, 3)
    assert parse_int_ranges("5, 0-2,1,9-9", "--seeds") == (5, 0, 1, 2, 9)
    for bad, message in (("3-1", "runs backwards"), ("a", "not an integer or a range"), ("-1", "not an integer"),
                         ("0,,1", "empty value"), ("", "empty value"), ("1-", "not an integer")):
        with pytest.raises(SpecbenchError, match=message):
            parse_int_ranges(bad, "--seeds")


@pytest.mark.slow
def test_cli_clean_rows_only_over_a_seed_range():
    from specbench.cli.app import app

    result = CliRunner().invoke(app, ["selftest", "--jobs", "1", "--seeds", "0-1", "--methods", "ngram", "--faults", "none",
                                      "--checks", "greedy", "--jobs", "1", "--no-chunked", "--no-hybrid"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    # chain rows (a constrained row's second word: grammar)
    rows = [line.split()[:4] for line in result.stdout.splitlines()
            if line.startswith(("none ", "ngram ")) and line.split()[1].isdigit()]
    # Columns method, seed, target (the seed's variant), engine; n-gram has no window + MoE row (and the hybrid
    # target's are off).
    assert rows == [["none", "0", "biased", "clean"], ["ngram", "0", "biased", "clean"], ["none", "1", "llama", "clean"],
                    ["ngram", "1", "llama", "clean"]]
    assert "false alarms: 0 of 6 clean rows" in result.stdout  # and n-gram's constrained row per seed
    for bad in (["--jobs", "0"], ["--jobs", "many"], ["--seeds", "2-0"]):
        failed = CliRunner().invoke(app, ["selftest", *bad])
        assert isinstance(failed.exception, SpecbenchError), failed.output
