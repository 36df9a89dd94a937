"""Read and check a local SPEED-Bench copy (parquet or JSONL; the layout is in speed_bench_layout.py).

Nothing is downloaded. Every problem is one SpecbenchError naming the file, the row or line, the field and what
was expected, raised before a model is loaded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from specbench.errors import SpecbenchError
from specbench.workloads import base
from specbench.workloads.base import DataFile
from specbench.workloads.speed_bench_layout import (
    DATA_SUFFIXES,
    PLACEHOLDER_PREFIX,
    PREPARE_HINT,
    SPLITS,
    categories_of,
)


@dataclass(frozen=True, slots=True)
class SpeedBenchRow:
    question_id: str
    category: str  # one of categories_of(split)
    sub_category: str | None
    turns: tuple[str, ...]  # user turns, asked in order (each after the model's answer to the one before)


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    expected: str  # for error messages
    is_required: bool  # required: present and non-null in every row; else null or absent allowed
    is_value: Callable[[Any], bool]
    is_arrow_type: Callable[[pa.DataType], bool]


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_turns(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(t, str) and t for t in value)


def _is_arrow_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _is_arrow_turns(kind: pa.DataType) -> bool:
    return (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and _is_arrow_text(kind.value_type)


# The published features (dataset card); the first three are what a run needs.
FIELDS = (
    _Field("question_id", "a string (the row's id)", True, _is_text, _is_arrow_text),
    _Field("category", "a string (the row's category)", True, _is_text, _is_arrow_text),
    _Field("turns", "a non-empty list of non-empty strings (the user turns)", True, _is_turns, _is_arrow_turns),
    _Field("sub_category", "a string or null", False, _is_text, _is_arrow_text),
    _Field("source", "a string or null", False, _is_text, _is_arrow_text),
    _Field("src_id", "a string or null", False, _is_text, _is_arrow_text),
    _Field("difficulty", "a string or null", False, _is_text, _is_arrow_text),
    _Field("multiturn", "a boolean or null", False, lambda v: isinstance(v, bool), pa.types.is_boolean),
)


@dataclass(frozen=True, slots=True)
class SpeedBenchData:
    rows: tuple[SpeedBenchRow, ...]  # every file's rows, files in sorted path order
    files: tuple[DataFile, ...]


def read_speed_bench(path: Path, split: str) -> SpeedBenchData:
    """Rows of `split` from `path`: a data file, a folder of them, or a folder holding a `<split>/` folder (the hub
    snapshot, or specdec_bench's prepare_data output `<dir>/speed`)."""
    if split not in SPLITS:
        raise SpecbenchError(f"unknown SPEED-Bench split {split!r}; supported: {', '.join(SPLITS)}")
    rows: list[SpeedBenchRow] = []
    files: list[DataFile] = []
    first_file: dict[str, Path] = {}
    for file in find_data_files(path, split):
        raw = file.read_bytes()
        num_rows = 0
        for where, record in _records(file, raw):
            row = _row(record, split, f"{file} {where}")
            if row.question_id in first_file:
                raise SpecbenchError(f"{file} {where}: field 'question_id' {row.question_id!r} repeats a row of "
                                     f"{first_file[row.question_id]} (expected unique ids)")
            first_file[row.question_id] = file
            rows.append(row)
            num_rows += 1
        if num_rows == 0:
            raise SpecbenchError(f"{file}: holds no rows")
        files.append(DataFile(str(file), hashlib.sha256(raw).hexdigest(), num_rows))
    return SpeedBenchData(tuple(rows), tuple(files))


def find_data_files(path: Path, split: str) -> tuple[Path, ...]:
    if path.is_file():
        if path.suffix not in DATA_SUFFIXES:
            raise SpecbenchError(f"{path}: not a SPEED-Bench data file (expected {' or '.join(DATA_SUFFIXES)})")
        return (path,)
    if not path.is_dir():
        raise SpecbenchError(f"SPEED-Bench data {str(path)!r} does not exist (expected a directory or a "
                             f"{' or '.join(DATA_SUFFIXES)} file)")
    split_dir = path / split
    folder = split_dir if split_dir.is_dir() else path
    if folder == path:
        others = sorted(p.name for p in path.iterdir() if p.is_dir() and p.name in SPLITS)
        if others:
            raise SpecbenchError(f"{path}: no {split}/ folder (found: {', '.join(others)}); choose one with "
                                 "--speed-bench-split")
    files = tuple(sorted(p for p in folder.rglob("*") if p.suffix in DATA_SUFFIXES and p.is_file()))
    if not files:
        raise SpecbenchError(f"{folder}: no {' or '.join(DATA_SUFFIXES)} files (expected SPEED-Bench's {split} "
                             "split, e.g. its test.parquet)")
    return files


def _records(file: Path, raw: bytes) -> Iterator[tuple[str, Any]]:
    """(where, record) per row: 'row N' of a parquet table, 'line N' of a JSONL file (both 1-based)."""
    if file.suffix == ".parquet":
        table = _parquet_table(file, raw)
        for index, record in enumerate(table.to_pylist(), start=1):
            yield f"row {index}", record
        return
    try:
        text = raw.decode("utf-8-sig")  # a leading byte-order mark (Windows editors write one) is no JSON
    except UnicodeDecodeError as err:
        raise SpecbenchError(f"{file}: not UTF-8 ({err})") from None
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            yield f"line {lineno}", json.loads(line)
        except (json.JSONDecodeError, RecursionError, ValueError) as err:
            raise SpecbenchError(f"{file} line {lineno}: malformed JSON ({err})") from None


def _parquet_table(file: Path, raw: bytes) -> pa.Table:
    """The table, its columns checked against FIELDS before any row is read."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(raw))
    except (pa.ArrowException, OSError) as err:
        raise SpecbenchError(f"{file}: not a readable parquet file ({str(err).splitlines()[0]})") from None
    for spec in FIELDS:
        if spec.name not in table.schema.names:
            if spec.is_required:
                raise SpecbenchError(f"{file}: missing column {spec.name!r} (expected {spec.expected})")
            continue
        kind = table.schema.field(spec.name).type
        if not (spec.is_arrow_type(kind) or (not spec.is_required and pa.types.is_null(kind))):
            raise SpecbenchError(f"{file}: column {spec.name!r} has type {kind}, expected {spec.expected}")
    return table


def _row(record: Any, split: str, where: str) -> SpeedBenchRow:
    if not isinstance(record, dict):
        raise SpecbenchError(f"{where}: expected an object with {', '.join(f.name for f in FIELDS[:3])}, got "
                             f"{type(record).__name__}")
    for spec in FIELDS:
        value = record.get(spec.name)
        if value is None and not spec.is_required:
            continue
        if spec.name not in record:
            raise SpecbenchError(f"{where}: missing field {spec.name!r} (expected {spec.expected})")
        if not spec.is_value(value):
            raise SpecbenchError(f"{where}: field {spec.name!r} is {_short(value)}, expected {spec.expected}")
    turns = tuple(record["turns"])
    num_bytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in turns)
    if num_bytes > base.MAX_ROW_BYTES:  # checked before anything is tokenised
        raise SpecbenchError(f"{where}: field 'turns' holds {num_bytes} bytes of text: more than the "
                             f"{base.MAX_ROW_BYTES} a row may hold")
    if turns[0].startswith(PLACEHOLDER_PREFIX):
        raise SpecbenchError(f"{where}: field 'turns' holds the hub's placeholder text, not the prompts; "
                             f"{PREPARE_HINT}")
    category = record["category"]
    known = categories_of(split)
    if category not in known:
        raise SpecbenchError(f"{where}: field 'category' is {category!r}, expected one of the {split} split's "
                             f"categories: {', '.join(known)} (another split's file? see --speed-bench-split)")
    return SpeedBenchRow(record["question_id"], category, record.get("sub_category"), turns)


def _short(value: Any) -> str:
    text = "null" if value is None else f"{type(value).__name__} {value!r}"
    return text if len(text) <= 60 else text[:57] + "..."
