"""Client-side admission: keep at most `concurrency` requests in the engine; a finished turn's follow-up goes next."""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable, Iterable

from specbench.engine.outputs import RequestOutput
from specbench.runs.finished_turn import FinishedTurn
from specbench.runs.turns import Turn


def run_turns(
    engine,
    turns: Iterable[Turn],
    concurrency: int,
    *,
    id_prefix: str,
    next_turn: Callable[[Turn, str], Turn | None] = lambda turn, completion: None,
    on_finish: Callable[[FinishedTurn], None] | None = None,
) -> list[FinishedTurn]:
    """Run `turns` (and the turns that follow them) to completion on an idle engine, in finish order.

    A request is handed to the engine when a slot is free, with arrival time max(scheduled time, now): time spent
    waiting for a slot is client queueing (kept as scheduled_time), not TTFT, as with a concurrency semaphore.
    """
    source = iter(turns)  # pulled one first turn per free slot: a duration-bounded source ends at its deadline
    follow_ups: deque[Turn] = deque()
    in_flight: dict[str, tuple[Turn, int]] = {}
    finished: list[FinishedTurn] = []
    counter = itertools.count()

    def submit() -> None:
        while len(in_flight) < concurrency:
            turn = follow_ups.popleft() if follow_ups else next(source, None)
            if turn is None:
                return
            index = next(counter)
            arrival = None if turn.scheduled_time is None else max(turn.scheduled_time, time.perf_counter())
            request_id = engine.add_request(
                list(turn.token_ids),
                turn.params,
                request_id=f"{id_prefix}/{index}/{turn.sample.sample_id}/t{turn.turn_index}",
                arrival_time=arrival,
            )
            in_flight[request_id] = (turn, index)

    def done(output: RequestOutput) -> None:
        turn, index = in_flight.pop(output.request_id)
        item = FinishedTurn(turn, output, index)
        finished.append(item)
        follow_up = next_turn(turn, output.text or "")
        if follow_up is not None:
            follow_ups.append(follow_up)  # the same user asks on, in the slot it just freed
        if on_finish is not None:
            on_finish(item)
        submit()

    submit()
    engine.run_until_done(on_finish=done)
    return finished
