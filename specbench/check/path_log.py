"""Which execution paths (execution_paths.py) the engines under test took during one check.

A check builds its engines through check/setup.py:build_llm; each engine under test (the speculative engine, or the
production plain engine) hands its recorder here. Reference engines (speculative=False: the clean plain decoding a
result is compared with, the clean target a law is computed from) are never added: an engine that is the yardstick
is not what the check covers.
"""

from __future__ import annotations

from specbench.execution_paths import PathRecorder


class PathLog:
    def __init__(self) -> None:
        self._recorders: list[PathRecorder] = []
        self._own = PathRecorder()  # paths a check exercises without an engine (the rows check calls the verifier)

    def add_engine(self, recorder: PathRecorder) -> None:
        self._recorders.append(recorder)

    def record(self, name: str) -> None:
        self._own.record(name)

    def taken(self) -> frozenset[str]:
        """Union over the engines added so far (read when the check ends: their runs are over)."""
        return frozenset().union(self._own.taken(), *(r.taken() for r in self._recorders))
