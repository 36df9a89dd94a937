"""`selftest --record FILE`: every finished row appended to a JSON-lines file as it comes in, and the rows a file
already holds taken from it instead of run again, so that a selftest longer than a machine's time limit (the CUDA
selftest needs ~12 min; a GPU job or a lent device may give 10) finishes over several runs.

The first line is the run's options (device class, seeds, methods, faults, checks, ...; and specbench's version):
a file recorded under other options is refused in one message, never mixed in. A row line is a SelftestRow; a last
line cut short by a kill is ignored (that row runs again). Rows are keyed by what makes them different rows
(target, seed, method, draft shape, chunked, constrained, fault): the planning (which faults are due at which seed,
row_tasks.due_faults) then goes exactly as in one run, because it reads the clean rows' recorded paths.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

from specbench.check.result import CheckResult
from specbench.errors import SpecbenchError
from specbench.selftest.row_tasks import RowTask, SelftestRow
from specbench.speculation.draft_shape import DraftShape

FORMAT = "specbench-selftest-rows/1"

# (target, seed, method, eagle_topk, num_draft_tokens, chunked, constrained, fault or "")
RowKey = tuple[str, int, str, int, int | None, bool, bool, str]


def row_key(row: SelftestRow | RowTask) -> RowKey:
    return (row.target, row.seed, row.method, row.shape.eagle_topk, row.shape.num_draft_tokens, row.chunked,
            row.constrained, row.inject or "")


def _encode(row: SelftestRow) -> str:
    results = [{**asdict(r), "paths": sorted(r.paths)} for r in row.results]
    return json.dumps({"method": row.method, "seed": row.seed, "inject": row.inject, "results": results,
                       "target": row.target, "shape": asdict(row.shape), "chunked": row.chunked,
                       "constrained": row.constrained}, sort_keys=True)


def _decode(line: str) -> SelftestRow:
    data = json.loads(line)
    results = tuple(CheckResult(**{**r, "paths": frozenset(r["paths"])}) for r in data["results"])
    return SelftestRow(data["method"], data["seed"], data["inject"], results, data["target"],
                       DraftShape(**data["shape"]), data["chunked"], data["constrained"])


class RowRecord:
    """The rows of one selftest's options, on disk; owned by the process that plans the rows (workers never
    write it)."""

    def __init__(self, path: str | Path, options: dict) -> None:
        self.path = Path(path)
        self.header = {"format": FORMAT, **options}
        self.rows: dict[RowKey, SelftestRow] = {}
        if self.path.exists() and self.path.stat().st_size > 0:
            self._load()
        else:
            self._write_line(json.dumps(self.header, sort_keys=True))

    def _load(self) -> None:
        lines = self.path.read_text().split("\n")
        try:
            header = json.loads(lines[0])
        except json.JSONDecodeError:
            header = None
        if header != self.header:
            differ = sorted(k for k in self.header if not isinstance(header, dict) or header.get(k) != self.header[k])
            raise SpecbenchError(f"--record {self.path}: recorded by a selftest with other options "
                                 f"({', '.join(differ) or 'not a selftest record'} differ); use a new file")
        for line in lines[1:-1]:  # the last piece: "" after a newline, else a line a kill cut short
            row = _decode(line)
            self.rows[row_key(row)] = row
        if lines[-1]:  # drop the cut line, so that appending starts on a line of its own
            self.path.write_text("\n".join(lines[:-1]) + "\n")

    def get(self, task: RowTask) -> SelftestRow | None:
        return self.rows.get(row_key(task))

    def add(self, row: SelftestRow) -> None:
        if row_key(row) not in self.rows:
            self.rows[row_key(row)] = row
            self._write_line(_encode(row))

    def _write_line(self, line: str) -> None:
        with self.path.open("a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())  # a row is kept even when the run is killed the next moment
