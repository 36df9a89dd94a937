"""--resume RUN_DIR: take the run's stored config, refuse a different one, and check the data is unchanged."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from pathlib import Path
from typing import Any

from specbench.bench.manifest import read_manifest
from specbench.errors import SpecbenchError
from specbench.runs.sweep_config import SweepConfig


def resume_config(
    run_dir: Path, requested: SweepConfig, explicit: Collection[str] | None
) -> tuple[SweepConfig, dict[str, Any]]:
    """The config stored in `run_dir`, and its manifest.

    `explicit`: fields the user set (on the command line); each must equal the stored value. None: every field.
    Fields left at their defaults take the stored values, so `specbench sweep --resume DIR` alone works.
    """
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    try:
        stored = SweepConfig.from_dict(manifest["config"])
    except (TypeError, ValueError, SpecbenchError) as err:  # a stored value of the wrong type or out of range
        raise SpecbenchError(f"--resume {run_dir}: manifest.json 'config' is malformed: {err}") from None
    stored_identity, requested_identity = stored.identity(), requested.identity()
    names = stored_identity if explicit is None else [n for n in explicit if n in stored_identity]
    differ = [n for n in names if stored_identity[n] != requested_identity[n]]
    if differ:
        details = "; ".join(f"{n}: run has {stored_identity[n]!r}, given {requested_identity[n]!r}" for n in differ)
        raise SpecbenchError(f"--resume {run_dir}: the config differs from the run's ({details})")
    config = dataclasses.replace(
        stored, results_dir=str(run_dir.parent), run_id=run_dir.name, resume=str(run_dir), quiet=requested.quiet
    )
    return config, manifest


def check_same_data(run_dir: Path, manifest: dict[str, Any], data_sha256: str) -> None:
    """Completed cells were measured on this data; new cells must be too (the backend checks models/servers)."""
    if manifest.get("workload") is None:
        raise SpecbenchError(f"--resume {run_dir}: manifest.json has no 'workload' record to check the data against")
    stored_data = manifest["workload"]["data_sha256"]
    if stored_data != data_sha256:
        raise SpecbenchError(
            f"--resume {run_dir}: the workload data changed since the run started "
            f"(sha256 {stored_data or 'none'} then, {data_sha256 or 'none'} now)"
        )
