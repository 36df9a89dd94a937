"""Client admission on a fake engine: the concurrency cap, multi-turn follow-ups, arrival times."""

from __future__ import annotations

import time

from specbench.backends.admission import run_turns
from specbench.engine.outputs import RequestOutput
from specbench.engine.stats import RequestStats
from specbench.runs.turns import Turn
from specbench.sampling_params import SamplingParams
from specbench.workloads.base import Prompt, Sample


class FakeEngine:
    """Finishes the oldest live request each step; records what it was given."""

    def __init__(self) -> None:
        self.live: list[str] = []
        self.added: list[tuple[str, float | None]] = []
        self.max_live = 0

    def add_request(self, prompt, params, *, request_id, arrival_time):
        self.live.append(request_id)
        self.added.append((request_id, arrival_time))
        self.max_live = max(self.max_live, len(self.live))
        return request_id

    def run_until_done(self, on_finish):
        while self.live:
            request_id = self.live.pop(0)
            on_finish(RequestOutput(request_id, None, (1,), (2,), f"answer {request_id}", "stop", RequestStats(0.0, 1)))


def _turn(sample_id: str, index: int = 0, scheduled: float | None = None) -> Turn:
    sample = Sample(sample_id=sample_id, category="c", turns=("q1", "q2"))
    return Turn(sample, index, Prompt(text="p", turn_index=index), (1, 2), SamplingParams(max_tokens=4), scheduled)


def test_concurrency_cap_and_follow_up_turns():
    engine = FakeEngine()
    completions: dict[str, str] = {}

    def next_turn(turn: Turn, completion: str) -> Turn | None:
        completions[f"{turn.sample.sample_id}/{turn.turn_index}"] = completion
        return _turn(turn.sample.sample_id, 1) if turn.turn_index == 0 else None

    finished = run_turns(engine, [_turn(str(i)) for i in range(5)], 2, id_prefix="cell", next_turn=next_turn)
    assert engine.max_live == 2
    assert len(finished) == 10
    assert sorted(item.request_index for item in finished) == list(range(10))
    order = [request_id.split("/", 2)[2] for request_id, _ in engine.added]
    # Sample 0's second turn is submitted as soon as its first finishes, before new first turns.
    assert order[:4] == ["0/t0", "1/t0", "0/t1", "1/t1"]
    for sample in map(str, range(5)):
        assert order.index(f"{sample}/t0") < order.index(f"{sample}/t1")
    assert completions["3/0"].startswith("answer cell/")


def test_arrival_is_the_later_of_schedule_and_slot():
    engine = FakeEngine()
    now = time.perf_counter()
    turns = [_turn("a", scheduled=now + 100.0), _turn("b", scheduled=now - 5.0), _turn("c")]
    run_turns(engine, turns, 8, id_prefix="x")
    arrivals = dict((rid.split("/")[2], arrival) for rid, arrival in engine.added)
    assert arrivals["a"] == now + 100.0  # in the future: the engine holds it until then
    assert now <= arrivals["b"] <= time.perf_counter()  # late: sent when the slot was free
    assert arrivals["c"] is None  # no schedule: the engine stamps it on arrival
