"""The sweep option group, generated from `SweepConfig`'s fields (their flags, help, defaults and parsing are
declared there, in runs/sweep_config.py); `sweep` and its presets take it, other commands single options of it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Annotated, Any

import typer

from specbench.cli.option_group import OptionGroup
from specbench.cli.options import DRAFTING, LOAD, OUTPUT, SERVER, WORKLOAD, group_options
from specbench.runs.sweep_config import SweepConfig

# Each panel's options in --help order; every SweepConfig field but `engine` (its own group) is in one.
_PANELS = {
    WORKLOAD: ("workload", "data_dir", "limit", "shots", "chat_template", "max_tokens", "input_len", "output_len",
               "speed_bench_data", "speed_bench_split", "speed_bench_categories", "temperature", "top_p", "top_k", "reasoning_parser"),
    LOAD: ("concurrency", "request_rate", "burstiness", "duration", "ramp_up_strategy", "ramp_up_start_rps",
           "ramp_up_end_rps", "warmup", "cache_reset", "repeats"),
    DRAFTING: ("num_steps", "eagle_topk", "num_draft_tokens", "speedup"),
    OUTPUT: ("goodput", "optimize", "label", "results_dir", "run_id", "resume", "quiet"),
    SERVER: ("backend", "base_url", "server_model", "api_key_env", "request_timeout", "info_timeout",
             "metrics_timeout", "cache_reset_timeout", "server_cmd", "server_baseline_cmd", "server_adapter",
             "server_ready_timeout"),
}
SWEEP_GROUP = OptionGroup(SweepConfig, tuple(name for names in _PANELS.values() for name in names),
                          {name: panel for panel, names in _PANELS.items() for name in names})
# `engine` is its own group; `inject` (not a sweep option: the command's --inject, cli/options.py) neither.
_unplaced = {f.name for f in dataclasses.fields(SweepConfig) if f.name != "engine" and f.metadata["cli"]} ^ set(
    SWEEP_GROUP.names)
if _unplaced or len(SWEEP_GROUP.names) != len(set(SWEEP_GROUP.names)):
    raise AssertionError(f"every SweepConfig option needs one help panel in cli/sweep_options.py: {sorted(_unplaced)}")

# Options other commands share with sweep (the same flag, help and panel); their defaults are SweepConfig's.
sweep_option = SWEEP_GROUP.annotation
DataDir = sweep_option("data_dir")  # default None

# Not a SweepConfig field: how the command starts, not what it runs.
Yes = Annotated[
    bool,
    typer.Option("--yes", "-y", rich_help_panel=OUTPUT,
                 help="start without asking when the plan's estimate is long "
                 "(asked only from a terminal)"),
]


def sweep_options(defaults: dict[str, Any] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command taking `options: dict` (SweepConfig field values of the options given) with the group,
    placed after its typer.Context and before its own options."""
    return group_options(SWEEP_GROUP, "options", defaults, first=True)
