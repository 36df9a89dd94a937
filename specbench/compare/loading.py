"""Read a sweep run directory (or the run carrying a --label inside a results directory) into a `Run`."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from specbench.compare.run_info import RunInfo, run_info
from specbench.errors import SpecbenchError
from specbench.json_file import json_problem
from specbench.runs.manifest_shape import check_manifest
from specbench.runs.schema import SCHEMA_VERSION
from specbench.runs.tables import read_run_table
from specbench.runs.sweep_config import RESULTS_DIR

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Run:
    path: Path
    info: RunInfo
    manifest: dict[str, Any]  # manifest.json as written by the sweep
    cells: pd.DataFrame  # cells.parquet: one row per cell and repeat
    requests: pd.DataFrame  # requests.parquet rows of those cells that succeeded
    categories: pd.DataFrame | None  # categories.parquet, None when the file is absent

    @property
    def label(self) -> str:
        return self.info.label


def load_run(spec: str | Path, results_dir: str | Path | None = None) -> Run:
    """`spec`: a run directory, or a run id or --label looked up among the runs of `results_dir`."""
    path = resolve_run_dir(spec, results_dir)
    manifest = _read_manifest(path)
    cells = _read_table(path, "cells")
    if cells.empty:
        raise SpecbenchError(f"{path}: the run has no completed cells")
    requests = _read_table(path, "requests")
    requests = requests[requests["cell_id"].isin(set(cells["cell_id"]))]
    requests = requests[requests["error"].isna()].reset_index(drop=True)  # failed requests (HTTP) measure nothing
    categories = _read_table(path, "categories") if (path / "categories.parquet").exists() else None
    info = run_info(path, manifest)
    methods = ",".join(sorted(set(cells["method"].astype(str))))
    if methods != info.method:  # a drafting server's cells carry the method read from it (runs/drafting.py)
        info = replace(info, method=methods)
    return Run(path, info, manifest, cells, requests, categories)


def resolve_run_dir(spec: str | Path, results_dir: str | Path | None) -> Path:
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / MANIFEST).is_file():
            runs = _runs_in(path)
            if runs:
                names = ", ".join(sorted(p.name for p in runs))
                raise SpecbenchError(
                    f"{path} is a results directory (runs: {names}): pass one run directory, run id or label"
                )
            raise SpecbenchError(f"{path} is not a specbench run directory (no {MANIFEST})")
        return path
    if path.exists():
        raise SpecbenchError(f"{path} is not a directory")
    root = Path(results_dir or RESULTS_DIR).expanduser()
    if (root / str(spec) / MANIFEST).is_file():  # a run id inside the results directory
        return root / str(spec)
    matches = [run for run in _runs_in(root) if _label_of(run) == str(spec)] if root.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    if matches:
        names = ", ".join(sorted(str(p) for p in matches))
        raise SpecbenchError(f"label {str(spec)!r} names {len(matches)} runs ({names}): pass one run directory")
    raise SpecbenchError(f"{spec}: no such run directory, and no run with that id or label in {root}")


def _runs_in(root: Path) -> list[Path]:
    return [p for p in sorted(root.iterdir()) if p.is_dir() and (p / MANIFEST).is_file()]


def _label_of(run_dir: Path) -> str | None:
    try:
        return json.loads((run_dir / MANIFEST).read_text()).get("label")
    except (OSError, ValueError, AttributeError, RecursionError):  # not a readable run: no label
        return None


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError, RecursionError) as err:  # ValueError: JSONDecodeError, an over-long integer
        raise SpecbenchError(f"{path / MANIFEST}: not readable JSON ({json_problem(err)})") from None
    return check_manifest(manifest, SCHEMA_VERSION, str(path))


def _read_table(path: Path, table: str) -> pd.DataFrame:
    return read_run_table(path, table)
