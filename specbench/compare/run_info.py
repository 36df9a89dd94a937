"""What a run measured, read from its manifest, and which differences between two runs matter for a comparison."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

from specbench.runs.sweep_config import MEASUREMENT_SETTINGS
from specbench.runs.target_architecture import label_from_entry


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    label: str  # --label, else the run id
    # Fields that must agree for deltas to mean "the engine changed" (else a loud warning, or an error with --strict):
    workload: str
    workload_version: str
    workload_data: str  # data sha256 and sample count
    target_model: str  # weights sha256 (else the path)
    dtype: str
    device: str
    # Fields shown when they differ (usually the change under test):
    draft_model: str
    method: str
    proposer: str
    git: str
    versions: str
    target_architecture: str = "-"  # backends/target_record.py's label; "-" for a server's model
    # Not a real measurement when set: "MUTANT[name]" (fault injected) and/or "SYNTHETIC ACCEPTANCE [...]".
    engine_note: str = ""
    # Shown when they differ: goodput deltas compare like with like only under the same bounds.
    goodput_slo: str = "-"  # --goodput items of the sweep
    # (name, value) of every MEASUREMENT_SETTINGS entry: any difference makes the runs incomparable.
    settings: tuple[tuple[str, str], ...] = ()


CRITICAL_FIELDS = ("workload", "workload_version", "workload_data", "target_model", "dtype", "device")


@dataclass(frozen=True)
class Difference:
    field: str
    before: str
    after: str
    is_critical: bool  # affects whether the two runs are comparable


def _get(manifest: dict[str, Any], *keys: str) -> Any:
    value: Any = manifest
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _text(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items()) if v is not None)
    return "-" if value is None else str(value)


def run_info(path: Path, manifest: dict[str, Any]) -> RunInfo:
    run_id = str(manifest.get("run_id") or path.name)
    target = _get(manifest, "models", "target") or {}
    sha = target.get("weights_sha256") if isinstance(target, dict) else None
    device = _get(manifest, "device") or {}
    git = _get(manifest, "specbench", "git") or {}
    return RunInfo(
        run_id=run_id,
        label=str(manifest.get("label") or run_id),
        workload=_text(_get(manifest, "workload", "name")),
        workload_version=_text(_get(manifest, "workload", "version")),
        workload_data=f"sha256 {_text(_get(manifest, 'workload', 'data_sha256'))[:12]}, "
        f"{_text(_get(manifest, 'workload', 'num_samples'))} samples",
        target_model=f"sha256 {sha[:12]}" if sha else _text(target.get("path") if isinstance(target, dict) else None),
        dtype=_text(device.get("dtype") if isinstance(device, dict) else None),
        device=" ".join(_text(device.get(k)) for k in ("type", "name")) if isinstance(device, dict) else "-",
        draft_model=_text(_get(manifest, "models", "draft_source")),
        method=_text(manifest.get("method")),
        proposer=_text(manifest.get("proposer")),
        git=f"{_text(git.get('sha'))[:10]}{' (dirty)' if git.get('dirty') else ''}" if isinstance(git, dict) else "-",
        versions=_text({k: v for k, v in (manifest.get("versions") or {}).items() if k != "specbench"}),
        target_architecture=label_from_entry(target.get("architecture") if isinstance(target, dict) else None),
        engine_note=_engine_note(manifest),
        goodput_slo=",".join(_get(manifest, "config", "goodput") or []) or "-",
        settings=measurement_settings(manifest),
    )


def measurement_settings(manifest: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    sampling, config = manifest.get("sampling") or {}, manifest.get("config") or {}
    out = []
    for name in MEASUREMENT_SETTINGS:
        value = sampling[name] if name in sampling else config.get(name)
        out.append((name, "default" if value is None else _text(value)))
    return tuple(out)


def _defaults() -> dict[str, set[str]]:
    """Each measurement setting's default values as the manifest renders them (`sweep`'s and the sampling
    parameters' defaults; None: the workload's own, stored as "default" or as the value it resolved to)."""
    from specbench.runs.sweep_config import SweepConfig
    from specbench.sampling_params import SamplingParams

    out: dict[str, set[str]] = {name: {"default", "-", "[]", "()", "None"} for name in MEASUREMENT_SETTINGS}
    for cls in (SweepConfig, SamplingParams):
        for f in fields(cls):
            if f.name in out and f.default is not MISSING and f.default is not None:
                out[f.name] |= {_text(f.default), _text(float(f.default)) if isinstance(f.default, int)
                                and not isinstance(f.default, bool) else _text(f.default)}
    return out


def settings_text(info: RunInfo, other: RunInfo | None = None) -> str:
    """The settings worth reading: those not at their defaults, and those that differ from `other`'s."""
    defaults, theirs = _defaults(), dict(other.settings) if other is not None else {}
    shown = [(name, value) for name, value in info.settings
             if value not in defaults.get(name, set()) or (other is not None and theirs.get(name) != value)]
    return ", ".join(f"{name}={value}" for name, value in shown) or "all at their defaults"


def _engine_note(manifest: dict[str, Any]) -> str:
    notes = []
    if manifest.get("fault_injected"):
        notes.append(f"MUTANT[{manifest['fault_injected']}]")
    if manifest.get("synthetic_acceptance"):
        notes.append(f"SYNTHETIC ACCEPTANCE {manifest['synthetic_acceptance']} (not lossless)")
    return " ".join(notes)


def differences(before: RunInfo, after: RunInfo) -> list[Difference]:
    """Every manifest field (but run id and label) and measurement setting whose value differs, critical first."""
    out = [
        Difference(f.name, getattr(before, f.name), getattr(after, f.name), f.name in CRITICAL_FIELDS)
        for f in fields(RunInfo)
        if f.name not in ("run_id", "label", "settings") and getattr(before, f.name) != getattr(after, f.name)
    ]
    after_settings = dict(after.settings)
    out += [
        Difference(name, value, after_settings.get(name, "-"), True)
        for name, value in before.settings
        if after_settings.get(name, "-") != value
    ]
    return sorted(out, key=lambda d: not d.is_critical)
