"""Run one sweep cell on the shared engine: set k, warm up, then the measured requests under the load pattern."""

from __future__ import annotations

import dataclasses
import math
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specbench.bench.admission import FinishedTurn, run_turns
from specbench.bench.arrivals import arrival_offsets
from specbench.bench.grid import CellKey
from specbench.bench.sweep_config import SweepConfig
from specbench.bench.turns import TurnPlanner, TurnSettings
from specbench.engine.stats import StepStats
from specbench.sampling_params import SamplingParams
from specbench.workloads.base import Sample

# Warmup requests only trigger first-call costs (allocations, kernels, caches); their length does not matter.
WARMUP_MAX_TOKENS = 8


@dataclass(frozen=True)
class CellRun:
    key: CellKey
    finished: tuple[FinishedTurn, ...]  # measured requests, in finish order
    steps: tuple[StepStats, ...]  # engine steps of the measured window
    start_unix_s: float
    wall_s: float  # warmup included


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
    engine,
    planner: TurnPlanner,
    samples: Sequence[Sample],
    key: CellKey,
    config: SweepConfig,
    chat_template: bool,
    on_request_done: Callable[[FinishedTurn], None] | None = None,
) -> CellRun:
    engine.set_num_steps(key.num_steps)
    settings = turn_settings(config, key, chat_template)
    start_unix, start = time.time(), time.perf_counter()
    num_warmup = config.num_warmup(key.concurrency)
    if num_warmup:
        warm = [planner.first_turn(samples[i % len(samples)], settings) for i in range(num_warmup)]
        warm = [dataclasses.replace(t, params=_short(t.params)) for t in warm]
        run_turns(engine, warm, key.concurrency, id_prefix=f"warmup/{key.cell_id}")

    first_step = len(engine.step_stats)
    turns = [planner.first_turn(sample, settings) for sample in samples]
    if not math.isinf(config.request_rate):
        # Every cell of a repeat sees the same arrival pattern, so cells differ only in what the grid varies.
        seed = zlib.crc32(f"arrivals/{config.seed}/{key.repeat}".encode())
        offsets = arrival_offsets(len(turns), config.request_rate, config.burstiness, seed)
        origin = time.perf_counter()
        turns = [dataclasses.replace(t, scheduled_time=origin + offset) for t, offset in zip(turns, offsets)]
    finished = run_turns(
        engine,
        turns,
        key.concurrency,
        id_prefix=key.cell_id,
        next_turn=lambda turn, completion: planner.next_turn(turn, completion, settings),
        on_finish=on_request_done,
    )
    return CellRun(
        key=key,
        finished=tuple(finished),
        steps=tuple(engine.step_stats[first_step:]),
        start_unix_s=start_unix,
        wall_s=time.perf_counter() - start,
    )


def _short(params: SamplingParams) -> SamplingParams:
    return dataclasses.replace(params, max_tokens=min(params.max_tokens, WARMUP_MAX_TOKENS))
