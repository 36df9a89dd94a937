"""Run the console entry point in-process (`specbench.cli.app.main`) and capture what a user would see.

No pytest fixtures, so hypothesis tests can call it once per example.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from dataclasses import dataclass
from unittest import mock


@dataclass(frozen=True)
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("error:")]


def run_main(*args: str) -> CliResult:
    from specbench.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    env = {"HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    with mock.patch.object(sys, "argv", ["specbench", *args]), mock.patch.dict(os.environ, env), \
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
