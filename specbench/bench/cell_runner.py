"""Run one sweep cell on the backend: set k, warm up, then the measured requests under the load pattern."""

from __future__ import annotations

import itertools
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specbench.backends.cache_reset import SKIPPED, CacheReset
from specbench.backends.prefix_cache import EMBEDDED, PrefixCacheWindow
from specbench.bench.load_pattern import LoadPattern
from specbench.bench.reasoning_split import answer_text
from specbench.bench.warmup import warmup_turns
from specbench.engine.stats import StepStats
from specbench.runs.cell_key import CellKey
from specbench.runs.finished_turn import FinishedTurn
from specbench.runs.sweep_config import SweepConfig
from specbench.runs.turns import Turn, TurnPlanner, TurnSettings, turn_settings
from specbench.workloads.base import Sample

if TYPE_CHECKING:
    from specbench.backends.base import BenchBackend
    from specbench.backends.server_info import ServerSpeculation
    from specbench.backends.spec_counters import SpecCounters


@dataclass(frozen=True)
class CellRun:
    key: CellKey
    finished: tuple[FinishedTurn, ...]  # measured requests, in finish order
    steps: tuple[StepStats, ...]  # engine steps of the measured window (embedded backend only)
    start_unix_s: float
    wall_s: float  # warmup included
    cache_reset: CacheReset  # whether the prefix cache was emptied before the cell (warmup included)
    backend: str = "embedded"
    counters: SpecCounters | None = None  # HTTP: server speculative counter deltas over the measured window
    counters_note: str | None = None  # HTTP: why `counters` is None
    server_speculation: ServerSpeculation | None = None  # HTTP: the server's speculative config, where it says it
    window_anomalies: tuple[str, ...] = ()  # HTTP: "kind: detail" of the window's counter checks
    prefix_cache: PrefixCacheWindow = EMBEDDED  # the server's prefix-cache hit rate over the window


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
    cache_reset = backend.reset_prefix_cache() if config.cache_reset else SKIPPED
    num_warmup = config.num_warmup(key.concurrency)
    if num_warmup:
        template = planner.first_turn(samples[0], settings)
        warm = warmup_turns(planner, template, key, settings, num_warmup, config.engine.seed)
        backend.run_turns(warm, key.concurrency, id_prefix=f"warmup/{key.cell_id}")

    backend.begin_window()
    # Every cell of a repeat sees the same arrival pattern, so cells differ only in what the grid varies.
    seed = zlib.crc32(f"arrivals/{config.engine.seed}/{key.repeat}".encode())
    finished = backend.run_turns(
        measured_turns(planner, samples, settings, LoadPattern.of(config), seed),
        key.concurrency,
        id_prefix=key.cell_id,
        next_turn=lambda turn, completion: planner.next_turn(
            turn, answer_text(completion, config.reasoning_parser), settings),
        on_finish=on_request_done,
    )
    window = backend.end_window()
    return CellRun(
        key=key,
        finished=tuple(finished),
        steps=window.steps,
        start_unix_s=start_unix,
        wall_s=time.perf_counter() - start,
        cache_reset=cache_reset,
        backend=backend.name,
        counters=window.counters,
        counters_note=window.counters_note,
        server_speculation=window.speculation,
        window_anomalies=window.anomalies,
        prefix_cache=window.prefix_cache,
    )


def measured_turns(
    planner: TurnPlanner, samples: Sequence[Sample], settings: TurnSettings, pattern: LoadPattern, seed: int
) -> Iterator[Turn]:
    """First turns in submission order, pulled lazily by the backend. Count-bounded: each sample once.
    Duration-bounded: samples cycle until the last scheduled arrival before the duration, or (all at once)
    until the duration has passed when a slot frees."""
    count = None if pattern.duration_s is not None else len(samples)
    origin = time.perf_counter()
    if pattern.is_scheduled:
        for i, offset in enumerate(pattern.offsets(count, seed)):
            yield planner.first_turn(samples[i % len(samples)], settings, scheduled_time=origin + offset)
        return
    indices = itertools.count() if count is None else range(count)
    for i in indices:
        if pattern.duration_s is not None and time.perf_counter() - origin >= pattern.duration_s:
            return
        yield planner.first_turn(samples[i % len(samples)], settings)
