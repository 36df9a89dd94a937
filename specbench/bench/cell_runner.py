"""Run one sweep cell on the backend: set k, warm up, then the measured requests under the load pattern."""

from __future__ import annotations

import dataclasses
import math
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specbench.bench.admission import FinishedTurn
from specbench.bench.arrivals import arrival_offsets
from specbench.bench.grid import CellKey
from specbench.bench.sweep_config import SweepConfig
from specbench.bench.turns import TurnPlanner, TurnSettings
from specbench.engine.stats import StepStats
from specbench.sampling_params import SamplingParams
from specbench.workloads.base import Sample

if TYPE_CHECKING:
    from specbench.backends.base import BenchBackend
    from specbench.backends.spec_counters import SpecCounters

# Warmup requests only trigger first-call costs (allocations, kernels, caches); their length does not matter.
WARMUP_MAX_TOKENS = 8


@dataclass(frozen=True)
class CellRun:
    key: CellKey
    finished: tuple[FinishedTurn, ...]  # measured requests, in finish order
    steps: tuple[StepStats, ...]  # engine steps of the measured window (embedded backend only)
    start_unix_s: float
    wall_s: float  # warmup included
    backend: str = "embedded"
    counters: SpecCounters | None = None  # HTTP: server speculative counter deltas over the measured window
    counters_note: str | None = None  # HTTP: why `counters` is None


def turn_settings(config: SweepConfig, key: CellKey, chat_template: bool) -> TurnSettings:
    return TurnSettings(
        temperature=key.temperature,
        max_tokens=config.max_tokens,
        top_p=config.top_p,
        top_k=config.top_k,
        chat_template=chat_template,
        seed=config.seed,
        repeat=key.repeat,
    )


def run_cell(
    backend: BenchBackend,
    planner: TurnPlanner,
    samples: Sequence[Sample],
    key: CellKey,
    config: SweepConfig,
    chat_template: bool,
    on_request_done: Callable[[FinishedTurn], None] | None = None,
) -> CellRun:
    backend.start_cell(key)
    settings = turn_settings(config, key, chat_template)
    start_unix, start = time.time(), time.perf_counter()
    num_warmup = config.num_warmup(key.concurrency)
    if num_warmup:
        warm = [planner.first_turn(samples[i % len(samples)], settings) for i in range(num_warmup)]
        warm = [dataclasses.replace(t, params=_short(t.params)) for t in warm]
        backend.run_turns(warm, key.concurrency, id_prefix=f"warmup/{key.cell_id}")

    backend.begin_window()
    turns = [planner.first_turn(sample, settings) for sample in samples]
    if not math.isinf(config.request_rate):
        # Every cell of a repeat sees the same arrival pattern, so cells differ only in what the grid varies.
        seed = zlib.crc32(f"arrivals/{config.seed}/{key.repeat}".encode())
        offsets = arrival_offsets(len(turns), config.request_rate, config.burstiness, seed)
        origin = time.perf_counter()
        turns = [dataclasses.replace(t, scheduled_time=origin + offset) for t, offset in zip(turns, offsets)]
    finished = backend.run_turns(
        turns,
        key.concurrency,
        id_prefix=key.cell_id,
        next_turn=lambda turn, completion: planner.next_turn(turn, completion, settings),
        on_finish=on_request_done,
    )
    window = backend.end_window()
    return CellRun(
        key=key,
        finished=tuple(finished),
        steps=window.steps,
        start_unix_s=start_unix,
        wall_s=time.perf_counter() - start,
        backend=backend.name,
        counters=window.counters,
        counters_note=window.counters_note,
    )


def _short(params: SamplingParams) -> SamplingParams:
    return dataclasses.replace(params, max_tokens=min(params.max_tokens, WARMUP_MAX_TOKENS))
