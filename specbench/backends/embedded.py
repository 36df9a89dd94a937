"""The embedded engine as a benchmark backend: today's in-process sweep (per-request draft statistics, step rows)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from specbench.backends.admission import run_turns
from specbench.backends.base import CellWindow
from specbench.backends.cache_reset import CacheReset
from specbench.backends.prefix_cache import embedded_window
from specbench.config import EngineConfig
from specbench.recurrent.kernel_choice import FLA
from specbench.recurrent.tree_verify import HYBRID_TREE_FLA_REFUSAL
from specbench.errors import SpecbenchError
from specbench.backends.target_record import record_entry
from specbench.runs.cell_key import CellKey
from specbench.runs.environment import device_info
from specbench.runs.finished_turn import FinishedTurn
from specbench.runs.preflight import check_prompts_fit
from specbench.runs.sweep_config import SweepConfig
from specbench.runs.turns import Turn, TurnPlanner, TurnSettings
from specbench.runtime.hooks import EngineFault
from specbench.workloads.base import Sample


def release_device_memory(device) -> None:
    """Collect the engine's reference cycles now and hand the caching allocator's free blocks back to the driver, so
    the next engine's free-memory query sees them."""
    import gc

    import torch

    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


def engine_config(config: SweepConfig) -> EngineConfig:
    """The sweep's engine: its engine options, k up to the grid's largest, concurrency up to the largest cell's."""
    return dataclasses.replace(config.engine, max_num_steps=config.max_num_steps,
                               max_concurrency=max(config.concurrency))  # cells cap concurrency themselves


# With prefix caching off the engine frees a request's KV blocks when it finishes and never matches a new prompt against
# old blocks: later cells cannot be served from an earlier cell's cache.
NO_PREFIX_CACHE = CacheReset(False, "no prefix cache: the embedded engine reuses no KV across requests")


class EmbeddedBackend:
    name = "embedded"
    can_tokenize = True
    has_draft_stats = True

    def __init__(self, config: SweepConfig, engine=None, fault: EngineFault | None = None) -> None:
        """`engine`: an already built LLMEngine (tests); else one is loaded from the config, with `fault` applied
        (the one config.inject names: run_sweep checks they agree)."""
        if engine is None:
            from specbench.llm import create_engine

            engine = create_engine(engine_config(config), fault)
        if engine.parts.recurrent_kernels == FLA and any(topk > 1 for topk in config.eagle_topk):
            # refused before any cell runs, not at the first tree cell after the chain cells ran
            raise SpecbenchError(HYBRID_TREE_FLA_REFUSAL)
        self.engine = engine
        self.tokenizer = engine.tokenizer
        self._first_step = 0

    def check_prompts(
        self, planner: TurnPlanner, samples: Sequence[Sample], config: SweepConfig, settings: TurnSettings
    ) -> None:
        check_prompts_fit(self.engine, planner, samples, config, settings)

    server_fault = None  # no server: the run's own --inject is its fault

    def manifest_entries(self, config: SweepConfig) -> dict[str, Any]:
        engine = self.engine
        proposer = engine.proposer
        return {
            "backend": {"name": self.name},
            "device": {**device_info(engine.device), "dtype": str(engine.dtype).removeprefix("torch.")},
            "kv_pool": engine.parts.kv_pool_note,
            "cuda_graphs": engine.parts.cuda_graphs,
            "prefix_caching": engine.parts.prefix_caching == "on",
            "prefix_caching_note": engine.parts.prefix_caching,
            # a hybrid target's gated-delta-rule kernels, resolved (engine_config holds the option as given: auto)
            "recurrent_kernels": engine.parts.recurrent_kernels,
            "models": {"target": {**dataclasses.asdict(engine.parts.target.info),
                                  "architecture": record_entry(engine.parts.target.config)},
                       "draft_source": config.engine.draft},
            "proposer": proposer.describe() if proposer is not None else None,
            "engine_config": engine.config.to_dict(),
        }

    def check_resume(self, run_dir: Path, manifest: dict[str, Any]) -> None:
        models = manifest.get("models")  # typed by runs/manifest_shape.py; absent: nothing to match
        stored = models["target"].get("weights_sha256") if models else None
        current = self.engine.parts.target.info.weights_sha256
        if stored != current:
            raise SpecbenchError(
                f"--resume {run_dir}: the target weights changed since the run started "
                f"(sha256 {stored} then, {current} now)"
            )

    def start_cell(self, key: CellKey) -> None:
        # Never a moment with a tree shape and a k it does not fit: back to a chain before k changes, k before a tree.
        if key.draft_shape.is_tree:
            self.engine.set_num_steps(key.num_steps)
            self.engine.set_draft_shape(key.draft_shape)
        else:  # k = 0 and wherever --eagle-topk is 1
            self.engine.set_draft_shape(key.draft_shape)
            self.engine.set_num_steps(key.num_steps)

    def reset_prefix_cache(self) -> CacheReset:
        block_manager = self.engine.scheduler.block_manager
        if block_manager.prefix_cache is None:
            return NO_PREFIX_CACHE
        return CacheReset(True, f"engine prefix cache cleared ({block_manager.reset_prefix_cache()} cached blocks)")

    def run_turns(
        self,
        turns: Iterable[Turn],
        concurrency: int,
        *,
        id_prefix: str,
        next_turn: Callable[[Turn, str], Turn | None] = lambda turn, completion: None,
        on_finish: Callable[[FinishedTurn], None] | None = None,
    ) -> list[FinishedTurn]:
        return run_turns(self.engine, turns, concurrency, id_prefix=id_prefix, next_turn=next_turn, on_finish=on_finish)

    def begin_window(self) -> None:
        self._first_step = len(self.engine.step_stats)

    def end_window(self) -> CellWindow:
        steps = tuple(self.engine.step_stats[self._first_step :])
        return CellWindow(steps, None, None, prefix_cache=embedded_window(steps, self.engine.parts.prefix_caching))

    def close(self) -> None:
        """Let the engine go, and its device memory with it: a restart (the stress stage's after-restart condition)
        builds a new engine in this process, and on CUDA it sized its KV pool from the memory left free (an H100
        found no room for one block while the old engine's pool was still held)."""
        engine, self.engine = self.engine, None
        if engine is None:
            return
        device = engine.device
        del engine
        release_device_memory(device)
