"""The selftest's fault names, methods and CLI table. Every fault on the draft LM, EAGLE-1, EAGLE-3 and n-gram rows,
in one run: test_selftest_methods.py; the clean engine on ten seeds: test_check_false_alarms_selftest.py."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from specbench.errors import SpecbenchError
from specbench.faults import resolve_fault, wrap_verifier
from specbench.selftest.runner import run_selftest

def test_unknown_fault_lists_supported():
    with pytest.raises(SpecbenchError, match="supported: .*draft-kv-slice"):
        resolve_fault("no-such-fault")  # where engines are built (EngineConfig sits below the fault catalog)
    with pytest.raises(SpecbenchError, match="supported: .*draft-kv-slice"):
        run_selftest(faults=("no-such-fault",))
    with pytest.raises(SpecbenchError, match="supported: draft, eagle, eagle3, mtp, ngram"):
        run_selftest(methods=("medusa",))


def test_fault_off_costs_nothing():
    def verify(*args):
        return args

    assert wrap_verifier(None, verify) is verify
    assert wrap_verifier("draft-kv-slice", verify) is verify
    assert wrap_verifier("bonus-from-wrong-row", verify) is not verify


@pytest.mark.slow  # ~5 s: the not-slow loop stays under 5 min
def test_cli_selftest_prints_the_table_power_and_verdict():
    from specbench.cli.app import app

    result = CliRunner().invoke(app, ["selftest", "--jobs", "1", "--seeds", "0", "--methods", "eagle3", "--faults",
                                      "bonus-from-wrong-row", "--checks", "greedy,sampled", "--no-hybrid"],
                             catch_exceptions=False)  # the hybrid target's own eagle3 row: test_selftest_hybrid.py
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()  # the table; stderr has one progress line per row
    assert "eagle3 seed 0 bonus-from-wrong-row: detected" in result.stderr
    rows = [line for line in lines if line.split()[:2] == ["eagle3", "0"]]  # its chain rows
    assert [r.split()[3] for r in rows] == ["clean", "bonus-from-wrong-row"], result.output  # eagle3: no window_moe row
    trees = [line for line in lines if line.split()[:3] == ["eagle3", "t2/6", "0"]]  # its tree row (no mutants)
    assert [r.split()[4] for r in trees] == ["clean"] and trees[0].endswith("ok"), result.output
    assert lines[0].split()[4:] == ["greedy", "sampled", "verdict"], lines[0]
    assert rows[0].endswith("ok") and rows[1].endswith("detected"), result.output
    assert "DETECTED p=0.00" in rows[1], rows[1]  # the sampled test's p-value is in the table
    assert any(line.startswith("sampled, eagle3 seed 0 clean:") and " power " in line for line in lines), result.output
    assert "selftest passed" in lines[-1]
    bad = CliRunner().invoke(app, ["selftest", "--faults", "nope"])
    assert isinstance(bad.exception, SpecbenchError) and "supported:" in str(bad.exception)
