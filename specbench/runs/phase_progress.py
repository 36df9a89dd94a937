"""Progress of a long command's phases on stderr (gate stages, check phases, selftest rows) in the sweep's style
(bench/progress.py's lines): a line as each phase starts and one as it ends, with its time, the time elapsed and,
where the number of phases is known, an estimate of what is left. The same lines on a terminal and in a log (the
phases are few and long: no bar to redraw). Nothing when quiet."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


def format_elapsed(seconds: float) -> str:
    """`45s`, `1m05s`."""
    seconds = round(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class PhaseProgress:
    """`gate 2/6 logprobs ...` then `gate 2/6 logprobs: PASS in 12s; elapsed 40s, about 1m05s left`; with no total
    (`total=None`: selftest rows, chosen as the clean rows finish) `selftest row 7 ...: detected in 2s; elapsed 40s`."""

    def __init__(self, command: str, total: int | None, *, quiet: bool, file: TextIO | None = None,
                 clock: Callable[[], float] = time.perf_counter, estimate: bool = True) -> None:
        """`estimate`: say what is left (phases of like size: checks); off where one phase dwarfs the rest (the
        gate's sweep)."""
        self.command, self.total, self.quiet, self.clock = command, total, quiet, clock
        self.estimate = estimate
        self.file = file
        self.start_s = clock()
        self.phase_start_s = self.start_s
        self.num_done = 0

    def _print(self, line: str) -> None:
        if not self.quiet:
            print(line, file=self.file or sys.stderr, flush=True)

    def _position(self) -> str:
        index = self.num_done + 1
        return f"{index}/{self.total}" if self.total else str(index)

    def start(self, name: str, *, announce: bool = True) -> None:
        """`announce`: print the start line (off for phases over in a moment: their end line is enough)."""
        self.phase_start_s = self.clock()
        if announce:
            self._print(f"{self.command} {self._position()} {name} ...")

    def done(self, name: str, verdict: str = "", *, seconds: float | None = None) -> None:
        """`seconds`: the phase's own time where it ran elsewhere (a selftest worker); else since start()."""
        now = self.clock()
        taken = now - self.phase_start_s if seconds is None else seconds
        position = self._position()
        self.num_done += 1
        elapsed = now - self.start_s
        left = ""
        if self.estimate and self.total and self.num_done < self.total:
            left = f", about {format_elapsed(elapsed / self.num_done * (self.total - self.num_done))} left"
        said = f": {verdict}" if verdict else ""
        self._print(f"{self.command} {position} {name}{said} in {format_elapsed(taken)}; elapsed "
                    f"{format_elapsed(elapsed)}{left}")
