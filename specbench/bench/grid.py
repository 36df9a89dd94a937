"""Sweep cells: the (repeat, temperature, concurrency, num_steps, draft shape) grid (its comma lists:
runs/comma_lists.py)."""

from __future__ import annotations

from collections.abc import Sequence

from specbench.runs.cell_key import CellKey, launch_group
from specbench.runs.sweep_config import SweepConfig
from specbench.speculation.draft_shape import DraftShape


def build_grid(config: SweepConfig) -> tuple[CellKey, ...]:
    """Every cell in run order.

    Cells of one (repeat, temperature, concurrency) group run back to back, k = 0 first (speedup and agreement
    compare with it when a cell is written). The speculative k's alternate order between repeats (ascending on
    even repeats, descending on odd ones, ABAB), so over an even number of repeats a slow drift of the machine
    lands on every k alike; `bench/drift.py` brackets each group with short baseline probes to measure what is
    left. Each speculative k runs every draft tree shape of the grid (chains first), in the same alternating order.
    With --server-cmd every (k, shape) is one server launch: its cells run together, k = 0 first, no interleaving.
    """
    shapes = config.grid_draft_shapes
    cells = tuple(
        CellKey(repeat, temperature, concurrency, num_steps, topk, budget)
        for repeat in range(config.repeats)
        for temperature in config.temperature
        for concurrency in config.concurrency
        for num_steps, topk, budget in interleaved_points(config.grid_num_steps, shapes, repeat)
    )
    if config.server_cmd is not None:  # one server launch per (k, shape): its cells run together, k = 0 first
        return tuple(sorted(cells, key=launch_group))
    return cells


def interleaved_points(num_steps: tuple[int, ...], shapes: Sequence[DraftShape],
                       repeat: int) -> tuple[tuple[int, int, int | None], ...]:
    """(k, topk, budget) per cell of a group: k = 0 (a chain) first, then every speculative (k, shape) ascending on
    even repeats and descending on odd ones."""
    speculative = [(k, s.eagle_topk, s.num_draft_tokens) for k in interleaved_num_steps(num_steps, 0) if k
                   for s in shapes]
    baseline = tuple((0, 1, None) for k in num_steps if k == 0)
    return baseline + tuple(reversed(speculative) if repeat % 2 else speculative)


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


def interleaved_sides(repeat: int) -> tuple[str, str]:
    """`specbench ab`: which engine runs first in a repeat: A then B on even repeats, B then A on odd ones (ABBA),
    as the speculative k's alternate above, so a steady trend of the load lands on both engines alike."""
    return ("b", "a") if repeat % 2 else ("a", "b")
