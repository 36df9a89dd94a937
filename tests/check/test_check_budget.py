"""Issue 15 item 7: `check --budget fast` runs a trimmed battery and says what it skipped; unknown budgets fail."""

from __future__ import annotations

from tests.support.tiny_models import data_dir
from typer.testing import CliRunner

from specbench.check.budget import BUDGETS


def _check(pair, *args: str):
    from specbench.cli.app import app

    return CliRunner().invoke(app, ["check", "--target", str(pair.target), "--method", "draft", "--draft",
                                    str(pair.draft), "--data-dir", str(data_dir()), "--kv-cache-gb", "0.05", *args])


def test_fast_budget_states_what_it_skipped(sensitive_pairs, tmp_path):
    pair = sensitive_pairs(0)
    base = tmp_path / "fast.json"
    result = _check(pair, "--budget", "fast", "--save-baseline", str(base))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()  # the table (progress lines go to stderr)
    assert "budget fast" in lines[1] and BUDGETS["fast"].skipped in lines
    verdicts = {line.split()[0]: line.split()[1] for line in lines[2:] if line.split() and line.split()[0] in
                ("greedy", "sampled", "rows", "oracle", "invariants", "baseline")}
    assert verdicts == {"greedy": "PASS", "sampled": "SKIP", "rows": "PASS", "oracle": "PASS", "invariants": "PASS",
                        "baseline": "SKIP"}, result.output
    again = _check(pair, "--budget", "fast", "--baseline", str(base), "--checks", "baseline")
    assert again.exit_code == 0 and "baseline  PASS" in again.output, again.output
    mismatch = _check(pair, "--baseline", str(base), "--checks", "baseline")  # full budget: other prompts
    assert mismatch.exit_code != 0 and "same --budget" in str(mismatch.exception or mismatch.output)


def test_unknown_budget_lists_the_supported():
    from specbench.cli.app import app

    result = CliRunner().invoke(app, ["check", "--budget", "slow"])
    assert "supported: full, fast" in str(result.exception or result.output)
