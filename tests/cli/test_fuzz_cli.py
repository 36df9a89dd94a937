"""Property tests (hypothesis) of the entry point against random input: engine option values, prompt files, manifests.

Every example must end in exit status 2 with exactly one `error:` line and no traceback; an accepted value is
recognised by the error coming from the (missing) model instead, and must really be valid. Nothing is loaded (the
model path does not exist) and no run directory is created. CI runs ~40 examples a property; the `slow` variants
run many more.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specbench.config import DEVICE_PATTERN, EngineConfig
from specbench.runs.schema import SCHEMA_VERSION
from tests.support.cli_run import assert_one_clean_error, run_main

NOWHERE = "/nonexistent/specbench-fuzz-model"
QUICK = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# The shared group's numeric options, from EngineConfig's declarations (tuple options take comma lists).
_BOUNDED = [f for f in dataclasses.fields(EngineConfig) if f.metadata["bounds"] is not None and f.metadata["cli"]]
NUMERIC = [f for f in _BOUNDED if f.metadata["parse"] is None]
LISTS = [f for f in _BOUNDED if f.metadata["parse"] is not None]


def _flag(f: dataclasses.Field) -> str:
    return "--" + f.name.replace("_", "-")


def _number_text() -> st.SearchStrategy[str]:
    return st.one_of(
        st.integers(min_value=-(10**40), max_value=10**40).map(str),
        st.integers(min_value=-2, max_value=5000).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.sampled_from(["nan", "-nan", "inf", "-inf", "1e30", "1e-30", "0x10", "1_000", " 7", "", "0.0", "-0"]),
        # Any text but a flag: `--block-size --help` is a request for help, not a value.
        st.text(max_size=12).filter(lambda t: not t.startswith("--")),
    )


def _valid(f: dataclasses.Field, text: str) -> bool:
    """Whether `text` is a value the option should accept (finite, in range, an integer where one is needed)."""
    try:
        value = float(text)
    except ValueError:
        return False
    bounds = f.metadata["bounds"]
    return math.isfinite(value) and bounds.lo <= value <= bounds.hi and not (bounds.lo_open and value == bounds.lo)


def _check_engine_option(f: dataclasses.Field, text: str) -> None:
    result = run_main("generate", "-p", "hi", "--device", "cpu", "--target", NOWHERE, _flag(f), text)
    line = assert_one_clean_error(result)
    if NOWHERE in line:  # accepted: it must be valid
        assert _valid(f, text), (f.name, text, line)
    else:
        assert _flag(f) in line, (f.name, text, line)


@QUICK
@given(st.sampled_from(NUMERIC), _number_text())
def test_numeric_engine_options(f, text):
    _check_engine_option(f, text)


@pytest.mark.slow
@LONG
@given(st.sampled_from(NUMERIC), _number_text())
def test_numeric_engine_options_long(f, text):
    _check_engine_option(f, text)


def _check_list_or_device(flag: str, text: str) -> None:
    args = ["--method", "ngram", "-k", "1"] if flag == "--synthetic-acceptance" else []
    result = run_main("generate", "-p", "hi", "--target", NOWHERE, *args, flag, text)
    line = assert_one_clean_error(result)
    if NOWHERE in line and flag == "--device":
        assert DEVICE_PATTERN.fullmatch(text) and not text.startswith("cuda"), (text, line)  # CPU box: no CUDA
    elif NOWHERE not in line and "CUDA" not in line:
        assert flag in line, (flag, text, line)


_list_text = st.lists(_number_text().filter(lambda t: "," not in t), min_size=0, max_size=4).map(",".join)
_device_text = st.one_of(st.sampled_from(["cpu", "auto", "cuda", "cuda:0", "cuda:99", "tpu", "cuda:", "mps"]),
                         st.text(max_size=10).filter(lambda t: not t.startswith("--")))


@QUICK
@given(st.one_of(st.tuples(st.sampled_from([_flag(f) for f in LISTS]), _list_text),
                 st.tuples(st.just("--device"), _device_text)))
def test_list_and_device_options(case):
    _check_list_or_device(*case)


# ---- prompt files and manifests: random JSON, and valid documents with one field replaced ----

_json = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30) | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=12,
)
_PROMPT_ROWS = [{"prompt": "hello"}, {"messages": [{"role": "user", "content": "hi"}]},
                {"conversations": [{"from": "human", "value": "hi"}]}]


@st.composite
def _prompt_row(draw) -> object:
    """Mostly near-valid rows (a valid one with one key replaced or added), else any JSON."""
    if draw(st.booleans()):
        return draw(_json)
    row = dict(draw(st.sampled_from(_PROMPT_ROWS)))
    key = draw(st.sampled_from(["prompt", "messages", "conversations", "max_tokens", "temperature", "id", "category"]))
    row[key] = draw(_json)
    return row


@st.composite
def _prompt_file(draw) -> bytes:
    rows = draw(st.lists(_prompt_row(), min_size=0, max_size=4))
    if draw(st.booleans()):
        return json.dumps(rows).encode()  # ShareGPT-style array
    text = "\n".join(json.dumps(row) for row in rows)
    if draw(st.booleans()):  # a damaged or deeply nested line
        text += "\n" + draw(st.sampled_from(["{", "[" * 3000 + "]" * 3000, '{"prompt": 1e999}', "\x00", "NaN"]))
    return text.encode()


def _check_prompt_file(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path, results = Path(tmp) / "prompts.jsonl", Path(tmp) / "results"
        path.write_bytes(content)
        result = run_main("sweep", "-w", f"file:{path}", "--target", NOWHERE, "--device", "cpu",
                          "--results-dir", str(results), "-q")
        line = assert_one_clean_error(result)
        assert NOWHERE in line or str(path) in line, line
        assert not results.exists()


@QUICK
@given(_prompt_file())
def test_prompt_files(content):
    _check_prompt_file(content)


@pytest.mark.slow
@LONG
@given(_prompt_file())
def test_prompt_files_long(content):
    _check_prompt_file(content)


def _valid_manifest(prompts: Path) -> dict:
    return {"schema_version": SCHEMA_VERSION, "run_id": "r1", "label": "x",
            "config": {"workload": f"file:{prompts}", "target": NOWHERE, "limit": 1},
            "workload": {"name": "file", "version": "1", "data_sha256": None, "num_samples": 1},
            "versions": {"torch": "x"}, "sampling": {"max_tokens": 8},
            "models": {"target": {"path": NOWHERE, "weights_sha256": None}}, "backend": {"name": "embedded"}}


@st.composite
def _manifest(draw) -> object:
    """Any JSON, or the valid manifest with one (possibly nested) key replaced or removed."""
    if draw(st.integers(0, 3)) == 0:
        return draw(_json)
    manifest = _valid_manifest(Path("/prompts.jsonl"))
    section = draw(st.sampled_from([None, "config", "workload"]))
    target = manifest if section is None else manifest[section]
    # "target" stays: without it the resume would load the default model (valid, and slow).
    keys = sorted(set(target) - {"target"}) + ["goodput", "cells", "resumed", "models", "backend", "block_size"]
    key = draw(st.sampled_from(keys))
    if draw(st.booleans()):
        target.pop(key, None)
    else:
        target[key] = draw(_json)
    return manifest


def _check_manifest(manifest: object) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        prompts = Path(tmp) / "prompts.jsonl"
        prompts.write_text('{"prompt": "hello"}\n')
        text = json.dumps(manifest).replace("/prompts.jsonl", str(prompts))
        run = Path(tmp) / "results" / "r1"
        run.mkdir(parents=True)
        (run / "manifest.json").write_text(text)
        # A stored value of the right type may still be refused later by what checks it (an unknown workload name):
        # any one clean error will do.
        assert_one_clean_error(run_main("sweep", "--resume", str(run), "-q"))
        line = assert_one_clean_error(run_main("compare", str(run), str(run)))
        assert str(run) in line, line
        assert [p.name for p in run.iterdir()] == ["manifest.json"] and (run / "manifest.json").read_text() == text


@QUICK
@given(_manifest())
def test_manifests(manifest):
    _check_manifest(manifest)


@pytest.mark.slow
@LONG
@given(_manifest())
def test_manifests_long(manifest):
    _check_manifest(manifest)


def test_the_valid_documents_pass_validation(tmp_path):
    """The fuzzers' starting points are valid: they reach the model load (resume) or the tables (compare)."""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "hello"}\n')
    _check_prompt_file(prompts.read_bytes())
    run = tmp_path / "results" / "r1"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps(_valid_manifest(prompts)))
    assert NOWHERE in assert_one_clean_error(run_main("sweep", "--resume", str(run), "-q"))
    assert "cells.parquet is missing" in assert_one_clean_error(run_main("compare", str(run), str(run)))
