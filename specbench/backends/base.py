"""The benchmark-backend plug point: where a sweep cell's requests run (the embedded engine, or an HTTP server)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from specbench.backends.cache_reset import CacheReset
from specbench.backends.prefix_cache import EMBEDDED, PrefixCacheWindow
from specbench.backends.spec_counters import SpecCounters
from specbench.engine.stats import StepStats
from specbench.runs.cell_key import CellKey
from specbench.runs.finished_turn import FinishedTurn
from specbench.runs.sweep_config import SweepConfig
from specbench.runs.turns import Turn, TurnPlanner, TurnSettings
from specbench.workloads.base import Sample

if TYPE_CHECKING:
    from specbench.backends.server_info import ServerSpeculation


@dataclass(frozen=True)
class CellWindow:
    """What a backend measured server- or engine-side over one cell's measured window."""

    steps: tuple[StepStats, ...]  # embedded engine steps of the window; () over HTTP
    counters: SpecCounters | None  # HTTP: speculative counter deltas over the window; None when unavailable
    counters_note: str | None  # why `counters` is None (HTTP), else None
    speculation: ServerSpeculation | None = None  # HTTP: the server's speculative config, where it says it
    anomalies: tuple[str, ...] = ()  # HTTP: "kind: detail" of the counters' sanity checks (runs/anomalies.py)
    prefix_cache: PrefixCacheWindow = EMBEDDED  # the server's prefix-cache hit rate over the window


class BenchBackend(Protocol):
    name: str  # registry name, stored in cells.parquet `backend`
    tokenizer: Any  # renders chat templates for the TurnPlanner (a stand-in over HTTP without a tokenizer)
    can_tokenize: bool  # prompts are tokenised locally (False: Turn.token_ids stay empty)
    has_draft_stats: bool  # per-request draft counts exist (embedded engine only)

    def check_prompts(
        self, planner: TurnPlanner, samples: Sequence[Sample], config: SweepConfig, settings: TurnSettings
    ) -> None:
        """Raise SpecbenchError before anything is written when a prompt cannot run."""

    def manifest_entries(self, config: SweepConfig) -> dict[str, Any]:
        """Backend-specific manifest.json keys: backend, device, models, proposer, engine_config, kv_pool."""

    @property
    def server_fault(self) -> str | None:
        """The fault the server measured says it runs with (specbench serve --inject: /version `fault`); None for
        the embedded engine (its fault is the run's own --inject) and servers that say none."""

    def check_resume(self, run_dir: Path, manifest: dict[str, Any]) -> None:
        """Raise SpecbenchError when a resumed run would measure something else (weights, server model)."""

    def start_cell(self, key: CellKey) -> None:
        """Prepare for a cell (embedded: set k; HTTP: nothing, the server's k is fixed)."""

    def reset_prefix_cache(self) -> CacheReset:
        """Empty the backend's prefix cache before a cell (its warmup included), where one exists."""

    def run_turns(
        self,
        turns: Iterable[Turn],
        concurrency: int,
        *,
        id_prefix: str,
        next_turn: Callable[[Turn, str], Turn | None] = lambda turn, completion: None,
        on_finish: Callable[[FinishedTurn], None] | None = None,
    ) -> list[FinishedTurn]:
        """Run `turns` and their follow-ups with at most `concurrency` in flight; finished turns in finish order.
        `turns` is consumed lazily, one first turn per free slot (a duration-bounded source ends at its deadline)."""

    def begin_window(self) -> None:
        """Mark the start of a cell's measured window (after warmup)."""

    def end_window(self) -> CellWindow:
        """What was measured since `begin_window`."""

    def close(self) -> None: ...
