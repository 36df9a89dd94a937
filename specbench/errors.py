"""Errors a user can cause end in one clear message and a non-zero exit.

Library code raises `SpecbenchError` for such conditions (bad path, mismatched
vocabulary, malformed data, impossible configuration); the CLI catches it,
prints the message and exits with status 2. Anything else is a bug: it keeps
its traceback and exits with status 3 (ExitStatus.CRASHED), never 1, so a CI
tells a crash of specbench from a regression of what it measured.
"""

import enum


class ExitStatus(enum.IntEnum):
    """Every command's exit status, declared once (README "Exit status" lists them)."""

    PASSED = 0
    FAILED = 1  # a check, gate stage or --fail-on rule failed: the engine or server under test regressed
    USAGE = 2  # a user error: one `error: ...` line; nothing was run or written
    CRASHED = 3  # specbench itself raised (a bug): the verdict is incomplete; whatever report could be was written
    INTERRUPTED = 130  # Ctrl-C
    BROKEN_PIPE = 141  # the reader of stdout went away


class SpecbenchError(Exception):
    """A problem with the user's inputs or configuration, not a bug."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C that stopped work part-way; the message says what was kept and how to go on (exit status 130).

    A KeyboardInterrupt, so that no `except Exception` swallows it and a caller (pytest, a notebook) stops as on any
    Ctrl-C. Typer turns it into exit 130 before the CLI sees it; `cli.app.main` finds it on the exit's chain of
    causes to print this message.
    """


class ServerLaunchFailed(SpecbenchError):
    """A server specbench launched (--server-cmd) never became ready: nothing was measured on it."""
