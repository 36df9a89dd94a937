"""Typer application: commands only parse arguments and call library functions."""

from __future__ import annotations

import sys

import typer

try:  # recent typers vendor click as typer._click; earlier ones use click itself
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
    from typer.exceptions import Abort
except ImportError:  # pragma: no cover - depends on the installed typer
    from click.exceptions import Abort, ClickException, UsageError

    try:
        from click.exceptions import NoArgsIsHelpError
    except ImportError:  # click < 8.2 prints the help itself
        class NoArgsIsHelpError(UsageError):  # type: ignore[no-redef]
            pass

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
    """Console entry point: a user-caused error is one line on stderr and exit status 2.

    Click's own parse errors (a non-number for a numeric option, an unknown flag) are user errors too: printed as
    the same one line (not click's usage box), so every bad value reads alike.
    """
    try:
        status = app(standalone_mode=False)
    except SpecbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except NoArgsIsHelpError as exc:  # `specbench` alone: the help text
        exc.show()
        sys.exit(exc.exit_code)
    except UsageError as exc:
        print("error: " + " ".join(exc.format_message().split()), file=sys.stderr)
        sys.exit(2)
    except ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except Interrupted as exc:
        print(f"interrupted: {exc}", file=sys.stderr)
        sys.exit(130)
    except (KeyboardInterrupt, Abort):
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    # Without standalone mode click returns a typer.Exit's code (--help: 0) or the command's return value.
    sys.exit(status if isinstance(status, int) else 0)
