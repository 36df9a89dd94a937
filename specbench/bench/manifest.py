"""manifest.json of a run: what was measured, on what, with which data and config (read back by --resume)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import time
from pathlib import Path
from typing import Any

from specbench.bench.store import MANIFEST
from specbench.errors import SpecbenchError
from specbench.json_file import json_problem
from specbench.runs.environment import git_state, package_versions
from specbench.runs.manifest_shape import check_manifest
from specbench.runs.schema import SCHEMA_VERSION
from specbench.runs.sweep_config import SweepConfig
from specbench.workloads.base import LoadedData, Workload


def build_manifest(
    run_id: str,
    config: SweepConfig,
    backend,
    workload: Workload,
    data: LoadedData,
    cell_ids: list[str],
    sampling: dict[str, Any],
) -> dict[str, Any]:
    """`sampling`: the effective sampling settings of the first sample (workload defaults resolved).

    `backend` (backends.base.BenchBackend) adds backend, device, models, proposer, engine_config and kv_pool.
    """
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        # unix time = time_origin_unix + perf_counter seconds (all times in the parquet files)
        "time_origin_unix": time.time() - time.perf_counter(),
        "label": config.label,
        "specbench": {"version": package_versions()["specbench"], "git": git_state()},
        "versions": package_versions(),
        **backend.manifest_entries(config),
        "method": config.engine.method,
        # Forced per-position acceptance rates: outputs are NOT lossless when set (performance work only).
        "synthetic_acceptance": list(config.engine.synthetic_acceptance or ()) or None,
        # None for a real run; a mutant's name otherwise (specbench.faults): the run's --inject, or the fault a
        # `specbench serve --inject` server says it runs with (its /version)
        "fault_injected": config.inject or backend.server_fault,
        "workload": {
            "name": workload.name,
            "version": workload.version,
            "data_source": data.source,
            "data_sha256": data.data_sha256,
            "data_files": [dataclasses.asdict(f) for f in data.files],
            "num_samples": len(data.samples),
            "stop_strings": list(workload.stop_strings),
        },
        "sampling": sampling,
        "config": config.to_dict(),
        # warmup requests actually run before each cell, by concurrency (config.warmup is None for the default)
        "num_warmup": {str(c): config.num_warmup(c) for c in config.concurrency},
        "cells": cell_ids,
    }


def with_resume_session(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest plus a record of this session (code may have changed since the run started)."""
    session = {
        "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git": git_state(),
        "versions": package_versions(),
        "time_origin_unix": time.time() - time.perf_counter(),  # this process's perf_counter origin
    }
    return {**manifest, "resumed": [*manifest.get("resumed", []), session]}


def read_manifest(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / MANIFEST
    if not path.is_file():
        raise SpecbenchError(f"--resume {run_dir}: not a specbench run directory (no {MANIFEST})")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as err:  # ValueError: JSONDecodeError, an over-long integer
        raise SpecbenchError(f"--resume {run_dir}: cannot read {MANIFEST}: {json_problem(err)}") from None
    return check_manifest(manifest, SCHEMA_VERSION, f"--resume {run_dir}")
