"""`selftest --record FILE` (selftest/row_record.py): rows a killed run recorded are taken by the next run with the
same options, which runs only the rest and gives the one-run table; a row cut short by the kill runs again; a file
recorded under other options is refused."""

from __future__ import annotations

import pytest

from specbench.check.budget import BUDGETS
from specbench.errors import SpecbenchError
from specbench.selftest import runner
from specbench.selftest.row_record import RowRecord, row_key

KWARGS = {"seeds": (0,), "methods": ("draft",), "faults": ("bonus-from-wrong-row", "verify-kv-off-by-one"),
          "checks": ("greedy", "metrics"), "budget": BUDGETS["fast"], "window_moe": False, "trees": False,
          "chunked": False, "constrained": False, "jobs": 1}


def _verdicts(rows) -> list[tuple]:
    return [(row_key(row), [(r.name, r.passed, r.skipped, r.is_crashed, r.detail, r.seconds, r.paths)
                            for r in row.results]) for row in rows]


@pytest.mark.slow  # a tiny pair's preparation and greedy checks, twice: ~7-10 s
def test_a_second_run_takes_the_recorded_rows_and_runs_only_the_one_cut_short(tmp_path, monkeypatch):
    path = tmp_path / "rows.jsonl"
    first = runner.run_selftest(record_path=str(path), **KWARGS)
    assert len(first) == 4 and {row.inject for row in first} == {None, *KWARGS["faults"]}
    lines = path.read_text().splitlines()
    assert len(lines) == 1 + len(first)  # the options, then a row a line
    # a kill in the middle of the last row's line: that row (the last to finish) runs again, nothing else
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    real_run_row, ran = runner.run_row, []

    def counting(task):
        ran.append(row_key(task))
        return real_run_row(task)

    monkeypatch.setattr(runner, "run_row", counting)
    second = runner.run_selftest(record_path=str(path), **KWARGS)
    assert ran == [row_key(first[-1])]  # exactly the row whose line was cut
    assert _verdicts(second)[:-1] == _verdicts(first)[:-1]  # the others as recorded, their seconds included
    assert [row_key(r) for r in second] == [row_key(r) for r in first]
    # plain and draft clean, then the two faults (both caught by greedy)
    assert [r.detected for r in second] == [r.detected for r in first] == [False, False, True, True]
    assert len(path.read_text().splitlines()) == 1 + len(first)  # the cut line replaced, not duplicated


def test_a_record_of_other_options_is_refused_in_one_message(tmp_path):
    path = tmp_path / "rows.jsonl"
    RowRecord(path, {"device": "cuda", "seeds": [0, 1, 2], "checks": ["greedy"]})
    RowRecord(path, {"device": "cuda", "seeds": [0, 1, 2], "checks": ["greedy"]})  # the same options: taken
    with pytest.raises(SpecbenchError, match=r"--record .*rows.jsonl: recorded by a selftest with other options "
                                             r"\(checks, seeds differ\); use a new file"):
        RowRecord(path, {"device": "cuda", "seeds": [0], "checks": ["greedy", "rows"]})
    (tmp_path / "other.txt").write_text("not json\n")
    with pytest.raises(SpecbenchError, match="not a selftest record|differ"):
        RowRecord(tmp_path / "other.txt", {"device": "cpu"})


def test_cli_record_then_resume_prints_the_same_table(tmp_path):
    from typer.testing import CliRunner

    from specbench.cli.app import app

    path = tmp_path / "rows.jsonl"
    args = ["selftest", "--jobs", "1", "--seeds", "0", "--methods", "ngram", "--faults", "none", "--checks", "greedy",
            "--no-window-moe", "--no-hybrid", "--no-trees", "--no-chunked", "--no-constrained", "--quiet",
            "--record", str(path)]
    # (exit 1: with trees, hybrids and chunks off, some production paths go unreached; the same both times)
    first = CliRunner().invoke(app, args, catch_exceptions=False)
    assert "false alarms: 0 of 2 clean rows" in first.stdout, first.output
    assert len(path.read_text().splitlines()) == 3  # the options, the plain row, the n-gram row
    second = CliRunner().invoke(app, args, catch_exceptions=False)
    assert second.exit_code == first.exit_code

    def table(output: str) -> list[str]:  # all but the run's own seconds
        return [line for line in output.splitlines() if not line.startswith("selftest ")]

    assert table(second.stdout) == table(first.stdout)
    other = CliRunner().invoke(app, [*args[:-2], "--checks", "greedy,metrics", "--record", str(path)])
    assert isinstance(other.exception, SpecbenchError) and "checks differ" in str(other.exception)
