"""Progress bars on stderr: cells of the sweep, requests of the current cell (off when quiet or not a TTY)."""

from __future__ import annotations

import sys

from tqdm import tqdm


class Progress:
    def __init__(self, num_cells: int, num_done: int, *, quiet: bool) -> None:
        disable = quiet or not sys.stderr.isatty()
        self.cells = tqdm(total=num_cells, initial=num_done, desc="cells", unit="cell", position=0,
                          file=sys.stderr, disable=disable, dynamic_ncols=True)
        self.requests = tqdm(total=0, desc="requests", unit="req", position=1, leave=False,
                             file=sys.stderr, disable=disable, dynamic_ncols=True)

    def start_cell(self, cell_id: str, num_requests: int) -> None:
        self.cells.set_postfix_str(cell_id)
        self.requests.reset(total=num_requests)

    def request_done(self, *_: object) -> None:
        self.requests.update(1)

    def cell_done(self) -> None:
        self.cells.update(1)

    def close(self) -> None:
        self.requests.close()
        self.cells.close()
