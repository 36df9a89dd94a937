"""A check that raises inside the engine is a failing row, never an aborted battery."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable

from specbench.check.result import CheckResult
from specbench.errors import SpecbenchError


def crash_line(exc: BaseException) -> str:
    """`crashed: <type>: <first message line> (at file:line)` of the innermost frame: one line for a table."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    return f"crashed: {type(exc).__name__}{': ' + message if message else ''}{where}"


def run_guarded(name: str, run: Callable[[], CheckResult]) -> CheckResult:
    """run(); an engine exception becomes a failing `crashed:` result. User errors (SpecbenchError: a bad baseline
    file, a wrong option) and interrupts still propagate: they are not a verdict on the engine."""
    start = time.perf_counter()
    try:
        return run()
    except SpecbenchError:
        raise
    except Exception as exc:  # noqa: BLE001 - any engine failure is the verdict
        return CheckResult(name, False, crash_line(exc), time.perf_counter() - start, is_crashed=True)
