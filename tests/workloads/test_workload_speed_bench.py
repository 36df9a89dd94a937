"""SPEED-Bench from a local copy: layouts, formats, split and category selection, multi-turn replay, schema errors."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from specbench.errors import SpecbenchError
from specbench.workloads import get_workload
from specbench.workloads.base import DataSource
from specbench.workloads.speed_bench_layout import PLACEHOLDER_PREFIX
from tests.support.speed_bench_files import (
    ARROW_SCHEMA,
    QUALITATIVE_ROWS,
    THROUGHPUT_ROWS,
    row,
    write_jsonl,
    write_parquet,
    write_snapshot,
)

NO_DATA_ROOT = DataSource(None, "hub", ())


def _load(path: Path | None, limit: int | None = None, source: DataSource = NO_DATA_ROOT, **options):
    workload = get_workload("speed_bench", **({"path": str(path)} if path is not None else {}), **options)
    return workload.load(source, limit, seed=0)


def test_reads_each_split_of_a_prepared_copy(tmp_path):
    root = write_snapshot(tmp_path / "speed")
    qualitative = _load(root)  # the default split
    assert [s.sample_id for s in qualitative.samples] == [r["question_id"] for r in QUALITATIVE_ROWS]
    assert qualitative.samples[1].turns == ("Sort a list in Python.", "Now sort it in reverse.")
    assert qualitative.samples[0].category == "coding" and qualitative.samples[0].subcategory == "coding-sub"
    assert qualitative.files[0].name == str(root / "qualitative" / "test.parquet")
    assert qualitative.files[0].num_rows == 6 and qualitative.source == f"local:{root}"
    throughput = _load(root, split="throughput_1k")
    assert [s.category for s in throughput.samples] == ["low_entropy", "mixed", "high_entropy"]
    assert throughput.data_sha256 != qualitative.data_sha256


def test_parquet_and_jsonl_files_give_the_same_samples(tmp_path):
    from_parquet = _load(write_parquet(tmp_path / "q.parquet", QUALITATIVE_ROWS))
    from_jsonl = _load(write_jsonl(tmp_path / "q.jsonl", QUALITATIVE_ROWS))
    assert from_parquet.samples == from_jsonl.samples


def test_sharded_split_folder_reads_every_file_in_path_order(tmp_path):
    split_dir = tmp_path / "hub" / "qualitative"
    write_parquet(split_dir / "test-00001-of-00002.parquet", QUALITATIVE_ROWS[3:])
    write_parquet(split_dir / "test-00000-of-00002.parquet", QUALITATIVE_ROWS[:3])
    data = _load(tmp_path / "hub")
    assert [s.sample_id for s in data.samples] == ["q1", "q2", "q3", "q4", "q5", "q6"]
    assert [f.num_rows for f in data.files] == [3, 3]
    assert [s.sample_id for s in _load(split_dir).samples] == [s.sample_id for s in data.samples]


def test_default_location_is_under_the_data_root(tmp_path):
    write_snapshot(tmp_path / "speed_bench")
    data = _load(None, source=DataSource(tmp_path, "--data-dir"))
    assert len(data.samples) == 6
    with pytest.raises(SpecbenchError, match=r"\(no data root; specbench never downloads it\): pass --speed-bench-data"):
        _load(None)
    with pytest.raises(SpecbenchError, match=f"no {tmp_path / 'elsewhere' / 'speed_bench'}; specbench never"):
        _load(None, source=DataSource(tmp_path / "elsewhere", "--data-dir"))


def test_categories_select_rows_and_limit_spans_categories(tmp_path):
    root = write_snapshot(tmp_path)
    chosen = _load(root, categories=("math", "writing"))
    assert [s.sample_id for s in chosen.samples] == ["q3", "q4", "q5", "q6"]
    sampled = _load(root, limit=3)
    assert sorted(s.category for s in sampled.samples) == ["coding", "math", "writing"]
    with pytest.raises(SpecbenchError, match="'cooking' not in the qualitative split; supported: coding, "):
        _load(root, categories=("math", "cooking"))
    with pytest.raises(SpecbenchError, match="no qualitative rows in categories stem"):
        _load(root, categories=("stem",))
    with pytest.raises(SpecbenchError, match="unknown split 'throughput_4k'; supported: qualitative, throughput_1k"):
        _load(root, split="throughput_4k")


def test_turns_replay_the_models_own_answers():
    workload = get_workload("speed_bench")
    sample = _sample_with_two_turns()
    first = workload.first_prompt(sample, None, chat_template=False)
    second = workload.next_turn(sample, first, " my answer ", None, chat_template=False)
    assert [m.content for m in second.messages] == [*sample.turns[:1], "my answer", sample.turns[1]]
    assert workload.next_turn(sample, second, "done", None, chat_template=False) is None
    params = workload.sampling_params(sample)
    assert params.temperature == 0.0 and params.max_tokens == 4096
    assert workload.sampling_params(sample, temperature=0.5, max_tokens=7).max_tokens == 7
    assert workload.is_chat and workload.score(sample, "x") is None


def _sample_with_two_turns():
    from specbench.workloads.base import Sample

    return Sample(sample_id="q2", category="coding", turns=("Sort a list.", "Now in reverse."))


@pytest.mark.parametrize(
    ("rows", "schema", "message"),
    [
        ([{k: v for k, v in row("q1", "math", "x").items() if k != "turns"}],
         pa.schema([f for f in ARROW_SCHEMA if f.name != "turns"]),
         "{file}: missing column 'turns' (expected a non-empty list of non-empty strings (the user turns))"),
        ([{**row("q1", "math", "x"), "turns": "x"}], pa.schema([("turns" if f.name == "turns" else f.name,
                                                                pa.string() if f.name == "turns" else f.type)
                                                               for f in ARROW_SCHEMA]),
         "{file}: column 'turns' has type string, expected a non-empty list of non-empty strings"),
        ([row("q1", "math", "x"), row("q2", "cooking", "y")], ARROW_SCHEMA,
         "{file} row 2: field 'category' is 'cooking', expected one of the qualitative split's categories: coding,"),
        ([row("q1", "math", "x"), {**row("q2", "math", "y"), "category": None}], ARROW_SCHEMA,
         "{file} row 2: field 'category' is null, expected a string"),
        ([row("q1", "math")], ARROW_SCHEMA,
         "{file} row 1: field 'turns' is list [], expected a non-empty list"),
        ([row("q1", "math", PLACEHOLDER_PREFIX + "\n\n{question}")], ARROW_SCHEMA,
         "{file} row 1: field 'turns' holds the hub's placeholder text, not the prompts; resolve the hub copy"),
        ([row("q1", "math", "x"), row("q1", "coding", "y")], ARROW_SCHEMA,
         "{file} row 2: field 'question_id' 'q1' repeats a row of {file}"),
    ],
    ids=["missing-column", "column-type", "unknown-category", "null-category", "empty-turns", "placeholder",
         "duplicate-id"],
)
def test_parquet_schema_errors_name_file_row_field_and_expectation(tmp_path, rows, schema, message):
    path = write_parquet(tmp_path / "test.parquet", rows, schema)
    with pytest.raises(SpecbenchError) as err:
        _load(path)
    assert message.format(file=path) in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([{k: v for k, v in row("q1", "math", "x").items() if k != "question_id"}],
         "{file} line 1: missing field 'question_id' (expected a string (the row's id))"),
        ([{**row("q1", "math", "x"), "multiturn": "no"}],
         "{file} line 1: field 'multiturn' is str 'no', expected a boolean or null"),
        ([row("t1", "low_entropy", "x")],
         "field 'category' is 'low_entropy', expected one of the qualitative split's categories"),
        (["not an object"], "{file} line 1: expected an object with question_id, category, turns, got str"),
    ],
    ids=["missing-field", "field-type", "other-split", "not-an-object"],
)
def test_jsonl_schema_errors(tmp_path, lines, message):
    path = write_jsonl(tmp_path / "test.jsonl", lines)
    with pytest.raises(SpecbenchError) as err:
        _load(path)
    assert message.format(file=path) in str(err.value)


def test_layout_errors(tmp_path):
    root = write_snapshot(tmp_path / "speed")
    with pytest.raises(SpecbenchError, match=r"no throughput_8k/ folder \(found: qualitative, throughput_1k\)"):
        _load(root, split="throughput_8k")
    with pytest.raises(SpecbenchError, match="does not exist"):
        _load(tmp_path / "nowhere")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(SpecbenchError, match="not a SPEED-Bench data file"):
        _load(tmp_path / "notes.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecbenchError, match="no .parquet or .jsonl files"):
        _load(tmp_path / "empty")
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(SpecbenchError, match="not a readable parquet file"):
        _load(tmp_path / "bad.parquet")
    with pytest.raises(SpecbenchError, match="holds no rows"):
        _load(write_jsonl(tmp_path / "blank.jsonl", []))


def test_throughput_rows_keep_their_tier(tmp_path):
    data = _load(write_parquet(tmp_path / "t.parquet", THROUGHPUT_ROWS), split="throughput_32k",
                 categories=("high_entropy",))
    assert [(s.sample_id, s.category) for s in data.samples] == [("t3", "high_entropy")]


def test_a_row_past_the_size_limit_is_refused_before_tokenising(tmp_path, monkeypatch):
    from specbench.workloads import base

    monkeypatch.setattr(base, "MAX_ROW_BYTES", 1000)
    path = write_jsonl(tmp_path / "test.jsonl", [row("q1", "math", "x" * 600), row("q2", "math", "y" * 1001)])
    with pytest.raises(SpecbenchError, match=r"test\.jsonl line 2: field 'turns' holds 1001 bytes of text: more than "
                                             r"the 1000 a row may hold"):
        _load(path)
