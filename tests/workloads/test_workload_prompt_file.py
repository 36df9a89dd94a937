"""`--workload file:PATH`: JSONL prompt/messages rows and ShareGPT JSON, per-row settings, multi-turn replay with
the model's own answers, the data sha256, and one clear error (file, line, field) per malformed row."""

from __future__ import annotations

import hashlib
import json

import pytest

from specbench.errors import SpecbenchError
from specbench.workloads import get_workload

ROWS = [
    {"prompt": "The capital of France is", "max_tokens": 5, "category": "geo", "id": "p1"},
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": "FILE ANSWER"}, {"role": "user", "content": "Count to 3"}],
     "temperature": 0.5},
]


def _jsonl(tmp_path, rows, name="p.jsonl"):
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_jsonl_rows_become_samples_with_their_settings_and_sha(tmp_path):
    path = _jsonl(tmp_path, ROWS)
    workload = get_workload(f"file:{path}")
    data = workload.load(None, None, seed=0)
    raw, multi = data.samples
    assert (raw.sample_id, raw.category, raw.turns, raw.max_tokens, raw.is_raw_prompt) == (
        "p1", "geo", ("The capital of France is",), 5, True)
    assert (multi.sample_id, multi.category, multi.turns, multi.system) == ("1", "file", ("Hi", "Count to 3"),
                                                                            "Be brief.")
    assert data.files[0].sha256 == hashlib.sha256(path.read_bytes()).hexdigest() and data.data_sha256
    assert workload.is_chat  # the file holds a conversation: chat template on by default
    # per-row max_tokens unless --max-tokens; per-row temperature only under the grid's 'default'
    assert workload.sampling_params(raw).max_tokens == 5
    assert workload.sampling_params(raw, max_tokens=9).max_tokens == 9
    assert workload.sampling_params(multi).max_tokens == 256 and workload.sampling_params(multi).temperature == 0.5
    assert workload.sampling_params(multi, temperature=0.0).temperature == 0.0
    assert workload.sampling_params(raw).temperature == 0.0
    assert get_workload(f"file:{path}").load(None, 1, seed=0).samples == (raw,)


def test_conversations_replay_turn_by_turn_with_the_models_own_answer(tmp_path):
    workload = get_workload(f"file:{_jsonl(tmp_path, ROWS)}")
    raw, multi = workload.load(None, None, seed=0).samples
    assert workload.first_prompt(raw, None, chat_template=False).text == "The capital of France is"
    first = workload.first_prompt(multi, None, chat_template=False)
    assert first.text == "Be brief. USER: Hi ASSISTANT:" and first.turn_index == 0
    second = workload.next_turn(multi, first, " model says hello ", None, chat_template=False)
    assert [m.content for m in second.messages] == ["Be brief.", "Hi", "model says hello", "Count to 3"]
    assert "FILE ANSWER" not in second.text and second.turn_index == 1
    assert workload.next_turn(multi, second, "1 2 3", None, chat_template=False) is None
    assert workload.next_turn(raw, workload.first_prompt(raw, None, chat_template=False), "x", None,
                              chat_template=False) is None


def test_sharegpt_json(tmp_path):
    path = tmp_path / "share.json"
    path.write_text(json.dumps([
        {"id": "a", "conversations": [{"from": "human", "value": "Name a fruit"}, {"from": "gpt", "value": "Apple"},
                                      {"from": "human", "value": "Another"}]},
        {"id": "b", "conversations": [{"from": "system", "value": "sys"}, {"from": "human", "value": "x"}],
         "category": "misc", "max_tokens": 3},
    ], indent=2))
    a, b = get_workload(f"file:{path}").load(None, None, seed=0).samples
    assert a.turns == ("Name a fruit", "Another") and a.category == "file" and not a.is_raw_prompt
    assert (b.system, b.turns, b.category, b.max_tokens) == ("sys", ("x",), "misc", 3)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([ROWS[0], {"messages": []}], "line 2: field 'messages': should be a non-empty list"),
        ([ROWS[0], ROWS[0] | {"id": "q"}, {"prompt": 3}], "line 3: field 'prompt': should be a non-empty string"),
        ([{"text": "hi"}], "line 1: field 'prompt': a row needs exactly one of 'prompt', 'messages'"),
        ([{"prompt": "a", "messages": []}], "line 1: field 'prompt': a row needs exactly one of"),
        ([{"messages": [{"role": "bot", "content": "x"}]}], "line 1: field 'messages[0].role': should be one of"),
        ([{"messages": [{"role": "user", "content": 5}]}], "line 1: field 'messages[0].content': should be a string"),
        ([{"messages": [{"role": "assistant", "content": "x"}]}], "line 1: field 'messages': holds no user message"),
        ([{"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "s"}]}],
         "field 'messages[1].role': a system message may only come first"),
        ([{"prompt": "a", "max_tokens": 0}], "line 1: field 'max_tokens': should be an integer >= 1"),
        ([{"prompt": "a", "max_tokens": True}], "field 'max_tokens'"),
        ([{"prompt": "a", "temperature": -1}], "line 1: field 'temperature': should be a finite number >= 0"),
        ([{"prompt": "a", "category": ""}], "line 1: field 'category'"),
        ([{"prompt": "a", "id": 1}, {"prompt": "b", "id": "1"}], "line 1: field 'id': '1' is used by several rows"),
        ([ROWS[0], "3"], "line 2: field '(row)': expected a JSON object, got int"),
        ([ROWS[0], "{not json"], "malformed JSON in"),
    ],
)
def test_malformed_rows_name_file_line_and_field(tmp_path, rows, message):
    path = _jsonl(tmp_path, rows)
    with pytest.raises(SpecbenchError) as err:
        get_workload(f"file:{path}")
    assert str(path) in str(err.value) and message in str(err.value)


def test_malformed_sharegpt_entry_names_its_line(tmp_path):
    path = tmp_path / "share.json"
    path.write_text('[\n  {"conversations": [{"from": "human", "value": "ok"}]},\n'
                    '  {"conversations": [{"from": "robot", "value": "x"}]}\n]\n')
    with pytest.raises(SpecbenchError, match=r"share\.json line 3: field 'conversations\[0\]\.from'"):
        get_workload(f"file:{path}")
    path.write_text('[{"conversations": [{"from": "human", "value": "ok"}]}\n{"x": 1}]')
    with pytest.raises(SpecbenchError, match="line 2: expected ',' or ']'"):
        get_workload(f"file:{path}")


def test_missing_file_empty_file_and_bare_prefix(tmp_path):
    with pytest.raises(SpecbenchError, match="no such file"):
        get_workload(f"file:{tmp_path / 'absent.jsonl'}")
    with pytest.raises(SpecbenchError, match="holds no rows"):
        get_workload(f"file:{_jsonl(tmp_path, [])}")
    with pytest.raises(SpecbenchError, match="needs a path"):
        get_workload("file:")
    with pytest.raises(SpecbenchError, match="file:PATH"):
        get_workload("file")
    with pytest.raises(SpecbenchError, match="no option.*num_shots"):
        get_workload(f"file:{_jsonl(tmp_path, ROWS)}", num_shots=2)


def test_an_oversized_row_is_refused_before_it_is_read_whole(tmp_path, monkeypatch):
    """A 100 MB line once grew specbench to 12 GB (decoded, parsed and tokenised whole): a JSONL line is read at
    most MAX_ROW_BYTES + 1 at a time, and a row's text past MAX_ROW_BYTES is refused, in either format."""
    from specbench.workloads import base

    monkeypatch.setattr(base, "MAX_ROW_BYTES", 1000)
    path = _jsonl(tmp_path, [ROWS[0], {"prompt": "x" * 50_000}, ROWS[1]])
    reads = []
    real_open = type(path).open

    def watched_open(self, *args, **kwargs):
        f = real_open(self, *args, **kwargs)
        readline = f.readline
        f.readline = lambda size=-1: reads.append(size) or readline(size)
        return f

    monkeypatch.setattr(type(path), "open", watched_open)
    with pytest.raises(SpecbenchError, match=r"^\S*p\.jsonl line 2 is longer than 1000 bytes: a row holds one prompt"):
        get_workload(f"file:{path}")
    assert reads and all(0 < size <= 1001 for size in reads)  # every read bounded
    monkeypatch.undo()
    monkeypatch.setattr(base, "MAX_ROW_BYTES", 1000)
    turns = [{"role": "user", "content": "y" * 400}] * 3  # each message short, the row past the limit
    share = tmp_path / "share.json"
    share.write_text(json.dumps([{"conversations": [{"from": "human", "value": "hi"}]}, {"messages": turns}]))
    with pytest.raises(SpecbenchError, match=r"share\.json line 1: field 'messages': holds 1200 bytes of text: more "
                                             r"than the 1000 a row may hold"):
        get_workload(f"file:{share}")
    assert len(get_workload(f"file:{_jsonl(tmp_path, ROWS, 'ok.jsonl')}").rows) == 2


def test_a_byte_order_mark_is_skipped(tmp_path):
    """Windows editors save UTF-8 with a byte-order mark: JSONL and ShareGPT files (and the sha256 of their bytes)."""
    import codecs

    jsonl = tmp_path / "bom.jsonl"
    jsonl.write_bytes(codecs.BOM_UTF8 + "".join(json.dumps(r) + "\n" for r in ROWS).encode())
    data = get_workload(f"file:{jsonl}").load(None, None, seed=0)
    assert [s.sample_id for s in data.samples] == ["p1", "1"]
    assert data.files[0].sha256 == hashlib.sha256(jsonl.read_bytes()).hexdigest()
    share = tmp_path / "bom.json"
    share.write_bytes(codecs.BOM_UTF8 + json.dumps([{"conversations": [{"from": "human", "value": "hi"}]}]).encode())
    assert get_workload(f"file:{share}").load(None, None, seed=0).samples[0].turns == ("hi",)


def test_data_files_and_json_files_with_a_byte_order_mark_are_read(tmp_path):
    import codecs

    from specbench.json_file import read_json_object
    from specbench.workloads.data import _parse_jsonl

    assert _parse_jsonl(codecs.BOM_UTF8 + b'{"a": 1}\n{"a": 2}\n', "x.jsonl") == [(1, {"a": 1}), (2, {"a": 2})]
    config = tmp_path / "config.json"
    config.write_bytes(codecs.BOM_UTF8 + b'{"model_type": "llama"}')
    assert read_json_object(config, "model config") == {"model_type": "llama"}
