"""Help is readable at 80 columns and grouped into panels; the fault list is where --inject's help says."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

PANELS = ("Model", "Drafting", "Workload", "Load", "Output")


def _help(*command: str) -> str:
    from specbench.cli.app import app

    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("command", ["sweep", "gsm8k", "check"])
def test_help_fits_80_columns_and_shows_the_panels(command):
    text = _help(command)
    assert max(len(line) for line in text.splitlines()) <= 80
    titles = [line for line in text.splitlines() if line.startswith("╭─ ")]
    for panel in PANELS if command != "check" else ("Model", "Drafting"):
        assert any(t.startswith(f"╭─ {panel} ") for t in titles), (panel, titles)
    assert "--inject" in text


def test_inject_help_names_where_faults_are_listed_and_selftest_lists_them():
    from specbench.faults.catalog import fault_names

    assert "selftest --help" in " ".join(_help("sweep").split())
    listed = " ".join(_help("selftest").split())
    assert all(name in listed for name in fault_names())
