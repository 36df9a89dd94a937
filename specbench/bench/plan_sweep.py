"""Build a sweep's plan from its loaded data and backend (calibrating the backend when it can), then show it."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.bench.plan import SweepPlan, make_plan, measure_calibration
from specbench.bench.store import PARTS_DIR
from specbench.bench.warmup import WARMUP_CATEGORY, warmup_turns
from specbench.runs.cell_key import CellKey
from specbench.runs.sweep_config import DEFAULT_NUM_PROMPTS, SweepConfig
from specbench.runs.turns import Turn, TurnPlanner, TurnSettings
from specbench.workloads.base import Prompt, Sample

if TYPE_CHECKING:
    from specbench.backends.base import BenchBackend

CALIBRATION_SEED_OFFSET = 7919  # calibration prompts differ from every cell's warmup prompts


def plan_sweep(config: SweepConfig, backend: BenchBackend, planner: TurnPlanner, samples: Sequence[Sample],
               grid: Sequence[CellKey], settings: TurnSettings, run_dir: Path, explicit: Collection[str] | None,
               *, calibrate: bool = True) -> SweepPlan:
    """The plan of the cells not yet complete in `run_dir`; `settings`: the first cell's turn settings."""
    todo = [key for key in grid if not (run_dir / PARTS_DIR / "cells" / f"{key.cell_id}.parquet").exists()]
    first_turns = [planner.first_turn(sample, settings) for sample in samples]
    num_tokens = sum(turn.params.max_tokens * sample.num_turns for turn, sample in zip(first_turns, samples))
    calibration, reason = None, "no calibration requested"
    if not calibrate:
        pass
    elif not todo:
        reason = "nothing left to run"
    elif not config.is_embedded:  # a server's own state (caches, counters, scripted replies) stays the run's
        reason = "not calibrated over HTTP: the server's speed is its own"
    else:
        template, key = first_turns[0], todo[0]
        backend.start_cell(key)
        seed = config.engine.seed + CALIBRATION_SEED_OFFSET
        calibration = measure_calibration(
            backend, lambda num: warmup_turns(planner, template, key, settings, num, seed), max(config.concurrency),
            _prefill_turn(planner, template))
    return make_plan(
        config, num_prompts=len(samples), num_requests=sum(s.num_turns for s in samples),
        max_tokens=max(t.params.max_tokens for t in first_turns), num_tokens_per_cell=num_tokens,
        num_cells=len(grid), cells_todo_concurrency=[key.concurrency for key in todo], calibration=calibration,
        no_calibration_reason=reason,
        is_default_sample=explicit is not None and "limit" not in explicit and config.limit == DEFAULT_NUM_PROMPTS,
    )


def _prefill_turn(planner: TurnPlanner, template: Turn) -> Turn:
    """A prompt as long as `template`'s (in characters, or 4 per token id) with other words, 1 token out: it times
    a prefill without putting a measured prompt into a server's prefix cache."""
    length = len(template.prompt.text) or 4 * len(template.token_ids)
    filler = "calibration lantern orbit quartz harbor meadow copper signal canyon ember falcon glacier "
    text = (filler * (length // len(filler) + 1))[:max(1, length)]
    prompt = Prompt(text=text)
    sample = Sample(sample_id="calibrate-prefill", category=WARMUP_CATEGORY, turns=(text,))
    token_ids = planner.encode(prompt)
    if template.token_ids:  # other words tokenise to other counts: never longer than the prompt that fits
        token_ids = token_ids[:len(template.token_ids)]
    return Turn(sample, 0, prompt, token_ids, dataclasses.replace(template.params, max_tokens=1), None)
