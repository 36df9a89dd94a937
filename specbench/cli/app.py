"""Typer application: commands only parse arguments and call library functions."""

from __future__ import annotations

import sys

import typer

from specbench.errors import SpecbenchError

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


def main() -> None:
    """Console entry point: a user-caused error is one line on stderr and exit status 2."""
    try:
        app()
    except SpecbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except SystemExit as exc:  # typer exits 130 on any KeyboardInterrupt, Interrupted included: keep its message
        interrupted = _interrupted_cause(exc)
        if interrupted is None or exc.code != 130:
            raise
        print(f"interrupted: {interrupted}" if str(interrupted) else "interrupted", file=sys.stderr)
        sys.exit(130)
    except KeyboardInterrupt as exc:
        print(f"interrupted: {exc}" if str(exc) else "interrupted", file=sys.stderr)
        sys.exit(130)


def _interrupted_cause(exc: BaseException) -> KeyboardInterrupt | None:
    """The KeyboardInterrupt (an `Interrupted` with its message, or a bare Ctrl-C) that an exit stands for."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None
