"""Typer application: commands only parse arguments and call library functions."""

from __future__ import annotations

import sys

import typer

# typer >= 0.26 (vendored click): every parse error derives from TyperException, with its exit status.
from typer.exceptions import Abort, TyperException

from specbench.errors import Interrupted, SpecbenchError

app = typer.Typer(
    name="specbench",
    help="Benchmark and regression-test speculative decoding.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Benchmark and regression-test speculative decoding."""


def _register() -> None:
    # Commands register on import.
    from specbench.cli import (  # noqa: F401
        bench_presets, check, check_lossless, compare, demo, generate, plot, selftest, serve, sweep,
    )


_register()


def _one_line(message: str) -> str:
    # A message quoting user text (a file's key, a value) may hold line breaks; the error stays one line.
    return " ".join(message.splitlines())


def main() -> None:
    """Console entry point: a user-caused error is one line on stderr and exit status 2.

    The command line's own errors (a non-number for a numeric option, an unknown flag, a missing argument) are
    user errors too: printed as the same one line, not typer's usage box, so every bad value reads alike.
    """
    if not sys.argv[1:]:
        app()  # `specbench` alone: the help text (typer exits)
    try:
        status = app(standalone_mode=False)
    except SpecbenchError as exc:
        print(_one_line(f"error: {exc}"), file=sys.stderr)
        sys.exit(2)
    except TyperException as exc:
        print(_one_line(f"error: {exc.format_message()}"), file=sys.stderr)
        sys.exit(exc.exit_code)
    except Interrupted as exc:
        print(f"interrupted: {exc}", file=sys.stderr)
        sys.exit(130)
    except (KeyboardInterrupt, Abort):
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    # Without standalone mode typer returns a typer.Exit's code (--help: 0) or the command's return value.
    sys.exit(status if isinstance(status, int) else 0)
