"""The first turns of a workload's prompts, greedy, as every verification asks them (the gate's near-tie probe and
logprobs, check-lossless): the sweep's own turn planning (runs/turns.py) at repeat 0 and temperature 0, so a
verification asks exactly the prompts the sweep's cells asked."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.runs.cell_key import CellKey
from specbench.runs.preflight import workload_options
from specbench.runs.sweep_config import SweepConfig
from specbench.runs.turns import Turn, TurnPlanner, TurnSettings, turn_settings
from specbench.workloads.base import Sample, Workload


@dataclass(frozen=True)
class WorkloadSamples:
    workload: Workload
    samples: tuple[Sample, ...]  # the first config.limit samples, in the workload's order


@dataclass(frozen=True)
class FirstTurns:
    samples: tuple[Sample, ...]
    planner: TurnPlanner  # renders each sample's later turns with the same tokenizer (multi-turn workloads)
    settings: TurnSettings
    turns: tuple[Turn, ...]  # [num_samples]: turn 0 of each sample, in sample order


def load_samples(config: SweepConfig) -> WorkloadSamples:
    from specbench.workloads import get_workload
    from specbench.workloads.data import resolve_data_source

    workload = get_workload(config.workload, **workload_options(config))
    samples = workload.load(resolve_data_source(config.data_dir), config.limit, config.engine.seed).samples
    return WorkloadSamples(workload, tuple(samples))


def first_turns(config: SweepConfig, tokenizer, *, tokenize: bool,
                loaded: WorkloadSamples | None = None) -> FirstTurns:
    """`tokenize` False: prompts keep no token ids (an HTTP server tokenises them; `tokenizer` only renders).
    `loaded`: samples already read (a caller asking two sides reads them once)."""
    loaded = loaded or load_samples(config)
    planner = TurnPlanner(loaded.workload, tokenizer, tokenize=tokenize)
    chat_template = loaded.workload.is_chat if config.chat_template is None else config.chat_template
    # Greedy at repeat 0: a cell's turn settings depend on its temperature and repeat only, not on its k.
    settings = turn_settings(config, CellKey(0, 0.0, max(config.concurrency), 0), chat_template)
    return FirstTurns(loaded.samples, planner, settings,
                      tuple(planner.first_turn(sample, settings) for sample in loaded.samples))
