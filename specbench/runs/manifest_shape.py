"""The shape of a run's manifest.json as --resume and compare read it (one pydantic declaration).

A manifest is our own output, but a run directory can be copied, edited or foreign: every field the readers use
is checked for type here, so a bad one is one error naming the field instead of a KeyError deep in resume/compare.
Unknown keys are allowed (newer writers add fields).
"""

from __future__ import annotations

import json
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from specbench.config import EngineConfig
from specbench.errors import SpecbenchError
from specbench.json_file import first_error, json_kind
from specbench.runs.sweep_config import FLAT_NAMES, SweepConfig


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class WorkloadShape(_Shape):
    name: str
    version: str
    data_sha256: str | None  # None: generated data (no file)
    num_samples: int | None = Field(default=None, ge=0)


class TargetShape(_Shape):
    path: str | None = None
    weights_sha256: str | None = None  # None: not hashed (a server's model)
    architecture: dict[str, Any] | None = None  # backends/target_record.py; None: a server's model, older runs


class ModelsShape(_Shape):
    target: TargetShape  # each backend's check_resume compares it
    draft_source: str | None = None


class BackendShape(_Shape):
    name: str | None = None
    server: dict[str, Any] = {}  # an HTTP backend's server record (model, version)


def _stored_config_shape() -> type[BaseModel]:
    """The manifest's flat `config`: each key typed as its SweepConfig / EngineConfig field (all optional: a run
    recorded before an option existed lacks it), no other key. Validated from JSON, where arrays are the tuple
    fields."""
    hints = {**typing.get_type_hints(SweepConfig), **typing.get_type_hints(EngineConfig)}
    hints["request_rate"] = float | Literal["inf"]  # SweepConfig.to_dict writes an infinite rate as "inf"
    fields: dict[str, Any] = {name: (hints[name], None) for name in FLAT_NAMES}
    return create_model("StoredConfig", __config__=ConfigDict(extra="forbid", strict=True), **fields)


StoredConfigShape = _stored_config_shape()


class ManifestShape(_Shape):
    """Required: the schema version and the config (--resume rebuilds the run from it); the rest typed if present."""

    schema_version: int
    config: dict[str, Any]  # its values: StoredConfigShape
    run_id: str | None = None
    label: str | None = None
    workload: WorkloadShape | None = None
    sampling: dict[str, Any] | None = None
    versions: dict[str, Any] | None = None
    models: ModelsShape | None = None
    backend: BackendShape | None = None
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
            f"{schema_version} (docs/RESULTS_SCHEMA.md); open it with the specbench that wrote it, or read its "
            "parquet files directly"
        )
    try:
        ManifestShape.model_validate(manifest)
        StoredConfigShape.model_validate_json(json.dumps(manifest["config"]))
    except ValidationError as err:
        where = "" if err.title == ManifestShape.__name__ else "config."
        raise SpecbenchError(f"{what}: manifest.json {first_error(err, where)}") from None
    return manifest
