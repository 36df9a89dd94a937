"""Checks and options derived from the config before a run starts: workload options, prompts that cannot fit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specbench.errors import SpecbenchError
from specbench.runs.sweep_config import SweepConfig
from specbench.runs.turns import TurnPlanner, TurnSettings
from specbench.workloads.base import Sample


def workload_options(config: SweepConfig) -> dict[str, Any]:
    """Factory options the user set (the workload rejects those it does not take, naming what it supports)."""
    options = {"num_shots": config.shots, "input_len": config.input_len, "output_len": config.output_len,
               "path": config.speed_bench_data, "split": config.speed_bench_split,
               "categories": config.speed_bench_categories}
    if config.workload == "random" and config.limit is not None:
        options["num_prompts"] = config.limit
    return {name: value for name, value in options.items() if value is not None}


def check_prompts_fit(
    engine, planner: TurnPlanner, samples: Sequence[Sample], config: SweepConfig, settings: TurnSettings
) -> None:
    """Every first turn must fit the context and, with its output and drafts, the KV pool (as add_request checks)."""
    if engine.tokenizer is None and config.workload != "random":
        raise SpecbenchError(f"workload {config.workload} sends text: the model needs a tokenizer (--tokenizer)")
    if not samples:
        raise SpecbenchError(f"workload {config.workload} has no samples")
    max_len = engine.stop_checker.max_model_len
    for sample in samples:
        turn = planner.first_turn(sample, settings)
        num_prompt = len(turn.token_ids)
        if num_prompt >= max_len:
            raise SpecbenchError(
                f"sample {sample.sample_id}: prompt of {num_prompt} tokens does not fit max_model_len {max_len}"
            )
        needed = min(num_prompt + turn.params.max_tokens, max_len) + config.max_num_steps + 1
        if needed > engine.pool_tokens:
            raise SpecbenchError(
                f"sample {sample.sample_id}: KV pool holds {engine.pool_tokens} tokens but the request needs up "
                f"to {needed}; raise --kv-cache-gb or lower --max-tokens"
            )
