"""What a sweep leaves when a cell fails part-way: the completed cells and one line naming the failed cell and how to
resume, or, when nothing completed in a new run, no run directory at all (a run directory holds >= 1 cell)."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

from specbench.bench.store import RunStore


def resume_command(run_dir: Path) -> str:
    return f"specbench sweep --resume {shlex.quote(str(run_dir))}"


def discard_if_empty(store: RunStore, is_new_run: bool) -> bool:
    """Remove a new run's directory when no cell completed; True when it was removed."""
    if not is_new_run or store.completed():
        return False
    shutil.rmtree(store.run_dir, ignore_errors=True)
    return True


def kept_and_next(store: RunStore, num_cells: int, is_new_run: bool, next_step: str) -> str:
    """'k of n cells are complete in DIR; <next_step>: <resume command>', or that nothing was kept."""
    if discard_if_empty(store, is_new_run):
        return f"no cell completed: {store.run_dir} was removed"
    return f"{len(store.completed())} of {num_cells} cells are complete in {store.run_dir}; {next_step}: " \
           f"{resume_command(store.run_dir)}"
