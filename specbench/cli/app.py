"""Typer application: commands only parse arguments and call library functions."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
import typer.main

# typer >= 0.26 (vendored click): every parse error derives from TyperException, with its exit status.
from typer.exceptions import Abort, Exit, TyperException

from specbench.cli import (
    ab, bench_presets, check, check_lossless, compare, demo, gate, generate, plot, selftest, serve, stress, sweep,
)
from specbench.errors import ExitStatus, Interrupted, SpecbenchError

HELP = ("Benchmark and regression-test speculative decoding. New here? Run `specbench demo` first: a small real "
        "sweep on the default model.")

app = typer.Typer(
    name="specbench",
    help=HELP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _print_version(value: bool) -> None:
    if value:
        from specbench import __version__

        print(f"specbench {__version__}")
        raise typer.Exit(0)


@app.callback(help=HELP)
def _root(
    version: Annotated[bool, typer.Option("--version", help="print the version and exit", callback=_print_version,
                                          is_eager=True)] = False,
) -> None:
    from specbench.runs.environment import quiet_bars_off_terminal

    quiet_bars_off_terminal(sys.stderr.isatty())  # before any command imports transformers or the hub


# Every command, in the order `specbench --help` lists them: (name, function, typer's other command settings). The
# command modules only define functions; this list registers them, so no command module imports this one back.
COMMANDS: tuple[tuple[str, Callable[..., Any], dict[str, Any]], ...] = (
    ("sweep", sweep.sweep, {}),
    ("ab", ab.ab, {}),
    ("gsm8k", bench_presets.gsm8k, {}),
    ("mtbench", bench_presets.mtbench, {}),
    ("check", check.check, {}),
    ("check-lossless", check_lossless.check_lossless, {}),
    ("compare", compare.compare, {}),
    ("demo", demo.demo, {"help": demo.HELP}),
    ("gate", gate.gate, {}),
    ("generate", generate.generate, {}),
    ("plot", plot.plot, {}),
    ("selftest", selftest.selftest, {"cls": selftest.FaultListHelp}),
    ("serve", serve.serve, {}),
    ("stress", stress.stress, {}),
)


def _register() -> None:
    for name, function, settings in COMMANDS:
        app.command(name, **settings)(function)


_register()


def _one_line(message: str) -> str:
    # A message quoting user text (a file's key, a value) may hold line breaks; the error stays one line.
    return " ".join(message.splitlines())


def main() -> None:
    """Console entry point: a user-caused error is one line on stderr and exit status 2; Ctrl-C exits 130.

    The command line's own errors (a non-number for a numeric option, an unknown flag, a missing argument) are
    user errors too: printed as the same one line, not typer's usage box, so every bad value reads alike. The click
    command is invoked here rather than through typer's own main, which turns a KeyboardInterrupt (an `Interrupted`
    with its message on what was kept) into a bare exit 130.
    """
    if not sys.argv[1:]:
        app()  # `specbench` alone: the help text (typer exits)
    command = typer.main.get_command(app)
    try:
        with command.make_context("specbench", sys.argv[1:]) as ctx:
            command.invoke(ctx)
        sys.exit(ExitStatus.PASSED)
    except SpecbenchError as exc:
        print(_one_line(f"error: {exc}"), file=sys.stderr)
        sys.exit(ExitStatus.USAGE)
    except Exit as exc:  # --help, or a command's own typer.Exit
        sys.exit(exc.exit_code)
    except TyperException as exc:
        print(_one_line(f"error: {exc.format_message()}"), file=sys.stderr)
        sys.exit(exc.exit_code)
    except Interrupted as exc:
        print(_one_line(f"interrupted: {exc}"), file=sys.stderr)
        sys.exit(ExitStatus.INTERRUPTED)
    except (KeyboardInterrupt, Abort):
        print("interrupted", file=sys.stderr)
        sys.exit(ExitStatus.INTERRUPTED)
    except BrokenPipeError:  # the reader went away (`specbench ... | head`): nothing left to say to it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the interpreter's final flush stays quiet
        sys.exit(ExitStatus.BROKEN_PIPE)
    except Exception as exc:  # noqa: BLE001 - a bug in specbench: its own status, never "failed"
        _report_crash(exc)
        sys.exit(ExitStatus.CRASHED)


def _report_crash(exc: BaseException) -> None:
    """The traceback (what a bug report needs), then one line saying this is a crash of specbench itself."""
    import traceback

    from specbench.check.crash import crash_line

    traceback.print_exception(exc, file=sys.stderr)
    print(_one_line(f"specbench {crash_line(exc)}: a bug in specbench, not a verdict on what it measured "
                    f"(exit {int(ExitStatus.CRASHED)})"), file=sys.stderr)
