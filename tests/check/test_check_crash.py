"""Issue 15 item 6: an engine that raises is a failing `crashed:` row and the table still prints. Before, the
exception escaped the battery: the selftest aborted with a traceback and printed no table."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from specbench.check.battery import run_checks
from specbench.check.greedy import check_greedy
from specbench.selftest.runner import selftest_setups


def test_a_crashing_engine_is_a_failing_row_per_check(tmp_path):
    setup = selftest_setups(str(tmp_path), 0, ("draft",), 3)["draft"].with_inject("bonus-row-past-end")
    with pytest.raises(IndexError):  # what the battery used to let escape
        check_greedy(setup)
    results = run_checks(setup, ("greedy", "oracle", "baseline"))
    crashed = [r for r in results if r.is_crashed]
    assert [r.name for r in crashed] == ["greedy", "oracle"], results
    for r in crashed:
        assert not r.passed and r.detail.startswith("crashed: IndexError: verify row") and "\n" not in r.detail
    assert results[2].skipped  # the others still ran


@pytest.mark.slow
def test_selftest_table_prints_with_a_crashed_row():
    from specbench.cli.app import app

    result = CliRunner().invoke(app, ["selftest", "--jobs", "1", "--seeds", "0", "--methods", "draft", "--faults",
                                      "bonus-row-past-end", "--checks", "greedy,baseline", "--no-hybrid"])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "bonus-row-past-end" in line and "CRASHED" in line)
    assert row.endswith("detected"), row
    assert "draft seed 0 bonus-row-past-end greedy: crashed: IndexError" in result.output
    assert "selftest passed" in result.output
