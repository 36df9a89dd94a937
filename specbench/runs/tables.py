"""Read one of a run directory's tables back (cells, requests, steps, categories): the one reader every consumer
calls (compare, gate, notebooks), so a table reads back alike everywhere.

Missing values come back as None in every non-numeric column. Parquet stores a missing string as null; pandas
(3.x's string dtype, or an all-null column) reads it as NaN, a float, and `row["reasoning_text"] or ""` then yields
NaN, whose `.strip()` crashed the gate on any empty output. Numeric columns keep NaN (their arithmetic needs it)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from specbench.errors import SpecbenchError
from specbench.runs.schema import TABLES


def read_run_table(run_dir: str | Path, table: str) -> pd.DataFrame:
    """`run_dir/<table>.parquet`, checked to be a specbench table of that name; missing non-numbers as None."""
    file = Path(run_dir) / f"{table}.parquet"
    if not file.is_file():
        raise SpecbenchError(f"{run_dir}: {file.name} is missing (an incomplete or foreign run directory)")
    try:
        frame = pd.read_parquet(file)
    except Exception as err:  # pyarrow raises several types for a damaged file
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise SpecbenchError(f"{file}: not a readable parquet file ({reason})") from None
    missing = [name for name, _, _ in TABLES[table] if name not in frame.columns]
    if missing:
        raise SpecbenchError(f"{file}: not a specbench {table} table (missing columns: {', '.join(missing[:6])})")
    return with_none_for_missing(frame)


def with_none_for_missing(frame: pd.DataFrame) -> pd.DataFrame:
    """Every non-numeric, non-boolean column as objects with None where a value is missing (NaN, NA, NaT)."""
    out = frame.copy()
    for name in out.columns:
        column = out[name]
        if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            continue
        values = column.astype(object)
        out[name] = values.where(~_is_missing(values), None)
    return out


def _is_missing(values: pd.Series) -> pd.Series:
    # pd.isna on an object column holding lists/arrays (per-position counts) is elementwise per cell: only scalars
    # can be missing.
    return values.map(lambda v: v is None or (pd.api.types.is_scalar(v) and bool(pd.isna(v))))
