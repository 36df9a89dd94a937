"""Sweep cells: the (repeat, temperature, concurrency, num_steps) grid, and parsing of its comma lists."""

from __future__ import annotations

import math
from collections.abc import Sequence

from specbench.errors import SpecbenchError
from specbench.runs.cell_key import DEFAULT_TEMPERATURE, CellKey
from specbench.runs.sweep_config import SweepConfig

SPECULATIVE_NUM_STEPS = (0, 1, 3, 5)  # default grid of a speculative method


def build_grid(config: SweepConfig) -> tuple[CellKey, ...]:
    """Every cell in run order.

    Cells of one (repeat, temperature, concurrency) group run back to back, k = 0 first (speedup and agreement
    compare with it when a cell is written). The speculative k's alternate order between repeats (ascending on
    even repeats, descending on odd ones, ABAB), so over an even number of repeats a slow drift of the machine
    lands on every k alike; `bench/drift.py` brackets each group with short baseline probes to measure what is
    left. With --server-cmd every k is one server launch: its cells run together, k = 0 first, no interleaving.
    """
    cells = tuple(
        CellKey(repeat, temperature, concurrency, num_steps)
        for repeat in range(config.repeats)
        for temperature in config.temperature
        for concurrency in config.concurrency
        for num_steps in interleaved_num_steps(config.grid_num_steps, repeat)
    )
    if config.server_cmd is not None:  # one server launch per k: its cells run together, k = 0 first
        return tuple(sorted(cells, key=lambda key: key.num_steps))
    return cells


def interleaved_num_steps(num_steps: tuple[int, ...], repeat: int) -> tuple[int, ...]:
    """k = 0 first, then the other k's ascending on even repeats and descending on odd ones."""
    baseline = tuple(k for k in num_steps if k == 0)
    speculative = sorted(k for k in num_steps if k != 0)
    return baseline + tuple(reversed(speculative) if repeat % 2 else speculative)


def run_groups(keys: Sequence[CellKey]) -> list[list[CellKey]]:
    """Consecutive cells of one (repeat, temperature, concurrency): what one pair of drift probes brackets."""
    groups: list[list[CellKey]] = []
    for key in keys:
        if groups and groups[-1][0].baseline == key.baseline:
            groups[-1].append(key)
        else:
            groups.append([key])
    return groups


def default_num_steps(method: str) -> tuple[int, ...]:
    return (0,) if method == "none" else SPECULATIVE_NUM_STEPS


def parse_int_list(text: str, flag: str) -> tuple[int, ...]:
    """"1,16,64" -> (1, 16, 64), duplicates dropped, order kept."""
    values = []
    for item in _items(text, flag):
        try:
            values.append(int(item))
        except ValueError:
            raise SpecbenchError(f"{flag}: {item!r} is not an integer (expected e.g. 1,16,64)") from None
    return tuple(dict.fromkeys(values))


def parse_temperature_list(text: str) -> tuple[float | None, ...]:
    """"0,0.7,default" -> (0.0, 0.7, None)."""
    values: list[float | None] = []
    for item in _items(text, "--temperature"):
        if item.lower() == DEFAULT_TEMPERATURE:
            values.append(None)
            continue
        try:
            value = float(item)
        except ValueError:
            raise SpecbenchError(
                f"--temperature: {item!r} is not a number or {DEFAULT_TEMPERATURE!r} (expected e.g. 0,1)"
            ) from None
        if not math.isfinite(value):
            raise SpecbenchError(f"--temperature must be finite, got {item}")
        values.append(value)
    return tuple(dict.fromkeys(values))


def _items(text: str, flag: str) -> list[str]:
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise SpecbenchError(f"{flag}: empty value in {text!r} (expected a comma-separated list)")
    return items
