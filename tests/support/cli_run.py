"""Run the console entry point in-process (`specbench.cli.app.main`) and capture what a user would see.

No pytest fixtures, so hypothesis tests can call it once per example.
"""

from __future__ import annotations

import contextlib
import io
import os
import functools
import sys
from dataclasses import dataclass
from unittest import mock

import typer.main
import typer.rich_utils


@dataclass(frozen=True)
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("error:")]


# Building the click command from the Typer app takes ~0.1 s (every command's signature is introspected); a click
# command is stateless between invocations, so the tests build it once.
_get_command = functools.lru_cache(maxsize=None)(typer.main.get_command)


def run_main(*args: str) -> CliResult:
    """`specbench ARGS` through the console entry point (its one-line errors and exit statuses)."""
    from specbench.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    env = {"HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    # MAX_WIDTH: typer reads TERMINAL_WIDTH once, at its first import (by whichever test ran first); COLUMNS decides
    with mock.patch.object(sys, "argv", ["specbench", *args]), mock.patch.dict(os.environ, env), \
            mock.patch.object(typer.rich_utils, "MAX_WIDTH", None), \
            mock.patch.object(typer.main, "get_command", _get_command), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return CliResult(code, out.getvalue(), err.getvalue())


def assert_one_clean_error(result: CliResult, *names: str) -> str:
    """Exit status 2, stderr exactly one `error: ...` line mentioning every one of `names`, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-2000:]
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


def main_exit(args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `specbench ARGS` through the console entry point, in a pytest test."""
    import pytest

    from specbench.cli.app import main

    monkeypatch.setattr(sys, "argv", ["specbench", *args])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SystemExit) as exc:
        main()
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err
