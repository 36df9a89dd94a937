"""Progress on stderr: bars for the cells of the sweep and the requests of the current cell on a terminal; else
(CI logs, `| tee`) one line per finished cell with the elapsed time and an estimate of what is left, and inside a
cell a line every REQUEST_LINE_INTERVAL_S seconds (at most) as requests finish. Nothing when quiet."""

from __future__ import annotations

import sys
import time

from collections.abc import Callable

from tqdm import tqdm

from specbench.runs.phase_progress import format_elapsed as _duration

REQUEST_LINE_INTERVAL_S = 30.0  # without a terminal: a long cell says how far it is at most this often


class Progress:
    def __init__(self, num_cells: int, num_done: int, *, quiet: bool,
                 line_interval_s: float = REQUEST_LINE_INTERVAL_S,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        is_tty = sys.stderr.isatty()
        self.clock, self.line_interval_s = clock, line_interval_s
        disable = quiet or not is_tty
        self.is_logging = not quiet and not is_tty
        self.num_cells, self.num_done, self.num_done_at_start = num_cells, num_done, num_done
        self.start = clock()
        self.cell_start = self.start
        self.last_line = self.start
        self.cell_id = ""
        self.num_requests: int | None = None  # of the current cell (None: bounded by a duration)
        self.num_requests_done = 0
        self.cells = tqdm(total=num_cells, initial=num_done, desc="cells", unit="cell", position=0,
                          file=sys.stderr, disable=disable, dynamic_ncols=True)
        self.requests = tqdm(total=0, desc="requests", unit="req", position=1, leave=False,
                             file=sys.stderr, disable=disable, dynamic_ncols=True)

    def start_cell(self, cell_id: str, num_requests: int) -> None:
        self.cell_id, self.cell_start = cell_id, self.clock()
        self.last_line = self.cell_start
        self.num_requests, self.num_requests_done = num_requests, 0
        self.cells.set_postfix_str(cell_id)
        self.requests.reset(total=num_requests)

    def request_done(self, *_: object) -> None:
        self.requests.update(1)
        self.num_requests_done += 1
        if self.is_logging:
            now = self.clock()
            if now - self.last_line >= self.line_interval_s:
                self.last_line = now
                print(self.request_line(now), file=sys.stderr, flush=True)

    def request_line(self, now: float) -> str:
        """`cell 4/8 r0-t0-c4-k3: 40/150 requests in 1m05s` (`40 requests` when a duration bounds the cell)."""
        total = "" if self.num_requests is None else f"/{self.num_requests}"
        return (f"cell {self.num_done + 1}/{self.num_cells} {self.cell_id}: {self.num_requests_done}{total} "
                f"requests in {_duration(now - self.cell_start)}")

    def cell_done(self) -> None:
        self.cells.update(1)
        self.num_done += 1
        if self.is_logging:
            print(self.cell_line(self.clock()), file=sys.stderr, flush=True)

    def cell_line(self, now: float) -> str:
        """`cell 3/8 r0-t0-c4-k3 done in 12s; elapsed 40s, about 1m05s left` (left: this session's mean cell time)."""
        elapsed = now - self.start
        num_run = self.num_done - self.num_done_at_start
        left = elapsed / num_run * (self.num_cells - self.num_done)
        return (f"cell {self.num_done}/{self.num_cells} {self.cell_id} done in {_duration(now - self.cell_start)}; "
                f"elapsed {_duration(elapsed)}, about {_duration(left)} left")

    def close(self) -> None:
        self.requests.close()
        self.cells.close()
