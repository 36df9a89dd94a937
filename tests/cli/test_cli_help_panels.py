"""Help is readable at 80 columns and grouped into panels; the fault list is where --inject's help says."""

from __future__ import annotations

from unittest import mock

import pytest
from typer.testing import CliRunner

PANELS = ("Model", "Drafting", "Workload", "Load", "Output")


def _help(*command: str) -> str:
    import typer.rich_utils

    from specbench.cli.app import app

    # 80 columns by COLUMNS alone: TERMINAL_WIDTH is read once, when typer.rich_utils is first imported, and would fix
    # the width of every later test's help in this process (test_help_guides read a help wrapped at 80 after this)
    with mock.patch.object(typer.rich_utils, "MAX_WIDTH", None):
        result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "80"})
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
