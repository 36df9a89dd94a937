"""Small synthetic SPEED-Bench files in the published format (the dataset card's 8 features), for tests only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

# The dataset card's feature types (workloads/speed_bench_layout.py).
ARROW_SCHEMA = pa.schema([
    ("question_id", pa.string()), ("category", pa.string()), ("sub_category", pa.string()),
    ("turns", pa.list_(pa.string())), ("source", pa.string()), ("src_id", pa.string()),
    ("difficulty", pa.string()), ("multiturn", pa.bool_()),
])


def row(question_id: str, category: str, *turns: str, sub_category: str | None = None) -> dict[str, Any]:
    return {"question_id": question_id, "category": category, "sub_category": sub_category or f"{category}-sub",
            "turns": list(turns), "source": "synthetic", "src_id": question_id, "difficulty": "easy",
            "multiturn": len(turns) > 1}


# Two rows in each of three qualitative categories; one conversation of two turns.
QUALITATIVE_ROWS = (
    row("q1", "coding", "Write a function that adds two numbers."),
    row("q2", "coding", "Sort a list in Python.", "Now sort it in reverse."),
    row("q3", "math", "What is 2 + 2?"),
    row("q4", "math", "What is 3 * 7?"),
    row("q5", "writing", "Write a haiku about the sea."),
    row("q6", "writing", "Describe a sunset in one sentence."),
)
THROUGHPUT_ROWS = (
    row("t1", "low_entropy", "Sort these words: pear apple fig."),
    row("t2", "mixed", "Find the needle: a b c needle d."),
    row("t3", "high_entropy", "Continue the story: once upon a time"),
)


def write_parquet(path: Path, rows, schema: pa.Schema | None = ARROW_SCHEMA) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(list(rows), schema=schema), path)
    return path


def write_jsonl(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_snapshot(root: Path) -> Path:
    """A copy laid out as specdec_bench's prepare_data writes it: <root>/<split>/test.parquet."""
    write_parquet(root / "qualitative" / "test.parquet", QUALITATIVE_ROWS)
    write_parquet(root / "throughput_1k" / "test.parquet", THROUGHPUT_ROWS)
    return root
