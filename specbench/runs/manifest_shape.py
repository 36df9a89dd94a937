"""The shape of a run's manifest.json as --resume and compare read it (one pydantic declaration).

A manifest is our own output, but a run directory can be copied, edited or foreign: every field the readers use
is checked for type here, so a bad one is one error naming the field instead of a KeyError deep in resume/compare.
Unknown keys are allowed (newer writers add fields).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specbench.errors import SpecbenchError
from specbench.json_file import first_error, json_kind


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class WorkloadShape(_Shape):
    name: str
    version: str
    data_sha256: str | None  # None: generated data (no file)
    num_samples: int | None = Field(default=None, ge=0)


class ConfigShape(_Shape):
    goodput: list[str] | None = None  # compare prints it; the rest is SweepConfig.from_dict's to check


class ManifestShape(_Shape):
    """Required: the schema version and the config (--resume rebuilds the run from it); the rest typed if present."""

    schema_version: int
    config: ConfigShape
    run_id: str | None = None
    label: str | None = None
    workload: WorkloadShape | None = None
    sampling: dict[str, Any] | None = None
    versions: dict[str, Any] | None = None
    models: dict[str, Any] | None = None
    cells: list[str] | None = None
    resumed: list[dict[str, Any]] | None = None
    fault_injected: str | None = None
    synthetic_acceptance: list[float] | None = None


def check_manifest(manifest: Any, schema_version: int, what: str) -> dict[str, Any]:
    """`manifest` (parsed manifest.json) checked: a JSON object, this schema version, the shape above.

    `what` starts each message (the run directory, or "--resume DIR").
    """
    if not isinstance(manifest, dict):
        raise SpecbenchError(f"{what}: manifest.json must hold a JSON object, got a JSON {json_kind(manifest)}")
    if "schema_version" not in manifest:
        raise SpecbenchError(f"{what}: not a specbench manifest (no schema_version)")
    if manifest["schema_version"] != schema_version:
        raise SpecbenchError(
            f"{what}: results schema version {manifest['schema_version']!r} differs from this specbench's "
            f"{schema_version}"
        )
    try:
        ManifestShape.model_validate(manifest)
    except ValidationError as err:
        raise SpecbenchError(f"{what}: manifest.json {first_error(err)}") from None
    return manifest
