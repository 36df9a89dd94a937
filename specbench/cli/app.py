"""Typer application: commands only parse arguments and call library functions."""

from __future__ import annotations

import sys

import typer

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


def main() -> None:
    """Console entry point: a user-caused error is one line on stderr and exit status 2."""
    try:
        app()
    except SpecbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except Interrupted as exc:
        print(f"interrupted: {exc}", file=sys.stderr)
        sys.exit(130)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
