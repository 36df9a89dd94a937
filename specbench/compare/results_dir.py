"""Where a notebook finds `results/`: the nearest one in the working directory or above it (a notebook runs from
the repo root or from notebooks/)."""

from __future__ import annotations

from pathlib import Path

from specbench.runs.sweep_config import RESULTS_DIR as RESULTS


def find_results_dir(start: str | Path | None = None) -> Path:
    """The first `results/` in `start` (default: the working directory) or its parents; else `start/results`."""
    here = Path.cwd() if start is None else Path(start).resolve()
    for base in (here, *here.parents):
        if (base / RESULTS).is_dir():
            return base / RESULTS
    return here / RESULTS
