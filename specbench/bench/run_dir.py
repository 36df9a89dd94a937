"""Choosing and creating `<results-dir>/<run-id>/`: checked before anything is written, created only after."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.runs.sweep_config import SweepConfig


def default_run_id(config: SweepConfig) -> str:
    """<local time>-<6 hex of the config>: sorts by time, tells configs apart."""
    digest = hashlib.sha256(json.dumps(config.identity(), sort_keys=True).encode()).hexdigest()[:6]
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{digest}"


def plan_run_dir(config: SweepConfig) -> Path:
    """The new run's directory; raises if it exists or could not be created. Creates nothing."""
    results = Path(config.results_dir).expanduser()
    check_writable(results)
    run_dir = results / (config.run_id or default_run_id(config))
    if run_dir.exists():
        raise SpecbenchError(f"{run_dir} already exists: pass --resume {run_dir} to finish it, or another --run-id")
    return run_dir


def check_writable(directory: Path) -> None:
    """The nearest existing ancestor must be a writable directory (so `directory` can be made in it)."""
    existing = directory
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise SpecbenchError(f"--results-dir {directory}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise SpecbenchError(f"--results-dir {directory}: {existing} is not writable")


def create_run_dir(run_dir: Path) -> None:
    try:
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        run_dir.mkdir()
    except OSError as err:
        raise SpecbenchError(f"cannot create the run directory {run_dir}: {err.strerror}") from None
