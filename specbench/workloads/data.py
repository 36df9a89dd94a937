"""Data-source resolution (--data-dir, $SPECBENCH_DATA_DIR, Hugging Face hub) and validated JSONL reading."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from specbench.errors import SpecbenchError
from specbench.workloads.base import DataFile, DataSource

DATA_DIR_ENV = "SPECBENCH_DATA_DIR"
# The checkout this module runs from (editable installs; for a wheel the candidate below simply does not exist).
_REPO_ROOT = Path(__file__).resolve().parents[1]
HUB_PROBE_TIMEOUT_S = 5.0
T = TypeVar("T")


class RowError(ValueError):
    """Raised by row parsers; `read_rows` adds the file and line."""


@dataclass(frozen=True, slots=True)
class HubSplit:
    dataset_id: str  # e.g. "openai/gsm8k"
    config: str | None  # e.g. "main"
    split: str  # e.g. "test"


@dataclass(frozen=True, slots=True)
class DataFileSpec:
    name: str  # relative to the data root, upstream layout: "gsm8k/test.jsonl"
    hub: HubSplit | None  # same rows on the hub, if any


def default_data_dirs() -> tuple[Path, ...]:
    """`../shared/data` beside the current directory, then beside the repository checkout (the layout the scripts
    and README use: data shared by sibling checkouts, never copied into one)."""
    candidates = (Path.cwd() / ".." / "shared" / "data", _REPO_ROOT.parent / "shared" / "data")
    return tuple(dict.fromkeys(path.resolve() for path in candidates))


def resolve_data_source(data_dir: str | Path | None = None) -> DataSource:
    """Explicit `data_dir`, then $SPECBENCH_DATA_DIR, then the first of `default_data_dirs` that exists, else the hub
    (checked lazily when a file is read)."""
    for value, origin in ((data_dir, "--data-dir"), (os.environ.get(DATA_DIR_ENV) or None, DATA_DIR_ENV)):
        if value is None:
            continue
        path = Path(value).expanduser()
        if not path.is_dir():
            raise SpecbenchError(f"data directory {str(path)!r} (from {origin}) does not exist or is not a directory")
        return DataSource(path, origin)
    defaults = default_data_dirs()
    for path in defaults:
        if path.is_dir():
            return DataSource(path, "../shared/data")
    searched = ("--data-dir (not given)", f"${DATA_DIR_ENV} (not set)", *(f"{p} (missing)" for p in defaults))
    return DataSource(None, "hub", searched)


def field(row: Mapping[str, Any], key: str, kind: type) -> Any:
    """row[key] checked against `kind` (bool is not accepted as int)."""
    if key not in row:
        raise RowError(f"missing key {key!r}")
    value = row[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RowError(f"key {key!r} should be {kind.__name__}, got {type(value).__name__}")
    return value


def read_rows(
    source: DataSource, spec: DataFileSpec, parse: Callable[[Mapping[str, Any]], T]
) -> tuple[list[T], DataFile, str]:
    """Parse every row of one data file. Returns (parsed rows, file record, source label)."""
    if source.data_dir is not None:
        path = source.data_dir / spec.name
        if not path.is_file():
            raise SpecbenchError(
                f"{spec.name} not found under {str(source.data_dir)!r} (from {source.origin}); "
                f"point --data-dir or ${DATA_DIR_ENV} at a directory holding {spec.name} in its upstream format"
            )
        raw = path.read_bytes()
        rows = _parse_jsonl(raw, str(path))
        label = f"local:{source.data_dir}"
    else:
        rows, raw = _hub_rows(spec, source.searched)
        label = f"hub:{spec.hub.dataset_id}" if spec.hub else "hub"
    parsed = []
    for lineno, row in rows:
        try:
            if not isinstance(row, dict):
                raise RowError(f"expected a JSON object, got {type(row).__name__}")
            parsed.append(parse(row))
        except RowError as err:
            raise SpecbenchError(f"malformed row in {spec.name} line {lineno}: {err}") from None
    if not parsed:
        raise SpecbenchError(f"{spec.name} holds no rows")
    return parsed, DataFile(spec.name, hashlib.sha256(raw).hexdigest(), len(parsed)), label


def _parse_jsonl(raw: bytes, where: str) -> list[tuple[int, Any]]:
    try:
        text = raw.decode("utf-8-sig")  # a leading byte-order mark (Windows editors write one) is no JSON
    except UnicodeDecodeError as err:
        raise SpecbenchError(f"{where} is not UTF-8: {err}") from None
    rows = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rows.append((lineno, json.loads(line)))
        except json.JSONDecodeError as err:
            raise SpecbenchError(f"malformed JSON in {where} line {lineno}: {err.msg}") from None
    return rows


def _hub_rows(spec: DataFileSpec, searched: tuple[str, ...]) -> tuple[list[tuple[int, Any]], bytes]:
    hint = f"pass --data-dir DIR or set ${DATA_DIR_ENV}=DIR, where DIR holds {spec.name} in its upstream format"
    if searched:
        hint += f" (looked in: {'; '.join(searched)})"
    if spec.hub is None:
        raise SpecbenchError(f"no local data for {spec.name} and no Hugging Face hub copy of it: {hint}")
    hub = spec.hub
    try:
        rows = load_hub_rows(hub)
    except Exception as err:  # network, auth, missing `datasets`: all end in the same advice
        raise SpecbenchError(
            f"no local data for {spec.name} and the hub dataset {hub.dataset_id} ({hub.config}, {hub.split}) "
            f"could not be loaded ({type(err).__name__}: {err}); {hint}"
        ) from None
    # Upstream files are exactly json.dumps(row) per line, so identical content hashes identically.
    raw = "".join(json.dumps(row) + "\n" for row in rows).encode()
    return list(enumerate(rows, start=1)), raw


def load_hub_rows(hub: HubSplit) -> list[dict[str, Any]]:
    """Rows of a hub split, in dataset order (tests replace this function; they never reach the hub).

    One quick probe first: `datasets` retries an unreachable hub for half a minute before it gives up.
    """
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        raise ConnectionError("offline mode (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE)")
    from huggingface_hub import HfApi

    try:
        HfApi().dataset_info(hub.dataset_id, timeout=HUB_PROBE_TIMEOUT_S)
    except Exception as err:
        raise ConnectionError(f"the hub is unreachable: {str(err).splitlines()[0] if str(err) else err!r}") from None
    import datasets

    return [dict(row) for row in datasets.load_dataset(hub.dataset_id, hub.config, split=hub.split)]
