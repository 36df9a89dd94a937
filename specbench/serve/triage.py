"""Which request a failed engine step is blamed on, so one request's failure fails that request alone.

A step runs every running request together, so a failure does not say whose it was. When more than one request
could have caused it, they are all preempted and re-admitted one per step (isolation: the scheduler's concurrency
is held at running + 1, so each prefill step holds one request and each decode step adds one to a batch that just
decoded cleanly). The next failure then points at the request admitted last. Isolation ends once every suspect is
back in a decode step that succeeded.

Failed steps in a row (with no step succeeding between) make the engine itself a suspect: the loop then runs a
canary, a one-token greedy request; the engine is dead only when the canary fails too (serve/engine_loop.py), so a
run of bad requests at an idle server cannot get it reported dead.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_FAILED_STEPS_IN_ROW = 3  # then the engine is a suspect: isolating one bad request fails 2 steps


@dataclass(frozen=True, slots=True)
class Verdict:
    culprits: tuple[str, ...]  # request ids to fail (empty: isolate the suspects, or nobody to blame)
    is_engine_suspect: bool  # MAX_FAILED_STEPS_IN_ROW or more steps failed in a row: check the engine itself


class Triage:
    def __init__(self, max_concurrency: int) -> None:
        self.max_concurrency = max_concurrency  # the scheduler's configured value
        self._suspects: set[str] = set()
        self._newest: str | None = None  # request admitted last while isolating
        self._num_failed_in_row = 0

    @property
    def num_failed_in_row(self) -> int:
        return self._num_failed_in_row

    @property
    def is_isolating(self) -> bool:
        return bool(self._suspects)

    def concurrency_for_next_step(self, num_running: int) -> int:
        return min(num_running + 1, self.max_concurrency) if self._suspects else self.max_concurrency

    def on_success(self, admitted: set[str], finished: set[str], waiting: set[str]) -> None:
        """A step succeeded: `admitted` entered the running batch in it, `finished` left, `waiting` still wait."""
        self._num_failed_in_row = 0
        if not self._suspects:
            return
        if admitted:
            self._newest = next(iter(admitted))  # a single request while isolating
        self._suspects -= finished
        if not admitted and not self._suspects & waiting:  # every suspect decoded together cleanly
            self._suspects.clear()
            self._newest = None

    def on_failure(self, involved: set[str], admitted: set[str]) -> Verdict:
        """A step failed: `involved` could have been in it, `admitted` entered the running batch in it."""
        self._num_failed_in_row += 1
        is_engine_suspect = self._num_failed_in_row >= MAX_FAILED_STEPS_IN_ROW
        if self._suspects:
            newest = next(iter(admitted)) if len(admitted) == 1 else self._newest
            culprits = (newest,) if newest is not None else tuple(sorted(involved))
            self._suspects -= set(culprits)
            self._newest = None
            return Verdict(culprits, is_engine_suspect)
        if len(involved) == 1:
            return Verdict(tuple(involved), is_engine_suspect)
        self._suspects = set(involved)
        return Verdict((), is_engine_suspect)
