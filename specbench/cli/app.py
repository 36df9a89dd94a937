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


def _register() -> None:
    from specbench.cli import generate  # noqa: F401  (commands register on import)


_register()


def main() -> None:
    try:
        app(standalone_mode=False)
    except SpecbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # click usage errors arrive here with standalone_mode=False
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Abort):
            sys.exit(1)
        raise
