"""Hostile inputs through the console entry point: each is ONE `error:` line naming what is wrong, exit 2, no
traceback, and nothing allocated or written first (no model is loaded: the errors come before; no run directory).

Four families: engine options (and generate's sampling options), model config.json files, prompt files, manifests.
"""

from __future__ import annotations

import json
import math

import pytest

from specbench.config import EngineConfig, Range
from specbench.runs.schema import SCHEMA_VERSION
from tests.support.cli_run import assert_one_clean_error, run_main

NOWHERE = "/nonexistent/specbench-model"  # reaching the model load with this is "everything before was fine"
DEEP = "[" * 10_000 + "]" * 10_000

# ---- engine options: `generate -p hi --target NOWHERE <args>`; the error must come before the model path's ----

ENGINE_CASES = [
    (["--kv-cache-gb", "nan"], "--kv-cache-gb"),
    (["--kv-cache-gb", "inf"], "--kv-cache-gb"),
    (["--kv-cache-gb", "-1"], "--kv-cache-gb"),
    (["--kv-cache-gb", "0"], "--kv-cache-gb"),
    (["--gpu-memory-utilization", "inf"], "--gpu-memory-utilization"),
    (["--gpu-memory-utilization", "nan"], "--gpu-memory-utilization"),
    (["--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization"),
    (["--gpu-memory-utilization", "0"], "--gpu-memory-utilization"),
    (["--seed", str(10**30)], "--seed"),
    (["--seed", "-1"], "--seed"),
    (["--seed", "1e30"], "--seed"),
    (["--block-size", "0"], "--block-size"),
    (["--block-size", "100000"], "--block-size"),
    (["--block-size", "abc"], "--block-size"),
    (["--max-num-batched-tokens", "0"], "--max-num-batched-tokens"),
    (["--max-num-batched-tokens", "-5"], "--max-num-batched-tokens"),
    (["--max-model-len", "0"], "--max-model-len"),
    (["--max-model-len", str(10**20)], "--max-model-len"),
    (["--device", "tpu"], "--device"),
    (["--device", "cuda:x"], "--device"),
    (["--device", ""], "--device"),
    (["--device", "cuda:0; rm -rf /"], "--device"),
    (["--ngram-min", "0"], "--ngram-min"),
    (["--ngram-max", str(10**9)], "--ngram-max"),
    (["--method", "ngram", "-k", "2", "--synthetic-acceptance", "0.5,nan"], "--synthetic-acceptance"),
    (["--synthetic-acceptance", "abc"], "--synthetic-acceptance"),
    (["--eagle-aux-layer-ids", "1,99999999999"], "--eagle-aux-layer-ids"),
    (["--eagle-aux-layer-ids", "1,x"], "--eagle-aux-layer-ids"),
    (["-k", "-1"], "max_num_steps"),
    (["--max-concurrency", "0"], "max_concurrency"),
    (["--max-concurrency", str(10**9)], "max_concurrency"),
    (["--temperature", "nan"], "temperature"),
    (["--temperature", "inf"], "temperature"),
    (["--max-tokens", "0"], "max_tokens"),
    (["--max-tokens", str(10**12)], "max_tokens"),
    (["--request-seed", str(10**30)], "seed"),
]


@pytest.mark.parametrize("args, name", ENGINE_CASES, ids=[" ".join(a)[:40] for a, _ in ENGINE_CASES])
def test_bad_engine_option_is_one_error_naming_it(args, name):
    line = assert_one_clean_error(run_main("generate", "-p", "hi", "--target", NOWHERE, *args), name)
    assert NOWHERE not in line  # refused before any model was looked at


def test_good_engine_options_reach_the_model_load():
    """The same options at valid values pass validation (the error is the missing model, not an option)."""
    args = ["--kv-cache-gb", "0.5", "--gpu-memory-utilization", "1", "--seed", str(2**63 - 1), "--block-size", "1024",
            "--max-num-batched-tokens", "1", "--max-model-len", "64", "--device", "cpu", "--temperature", "0.5"]
    assert_one_clean_error(run_main("generate", "-p", "hi", "--target", NOWHERE, *args), NOWHERE)


def test_every_bounded_option_accepts_its_bounds_and_refuses_beyond():
    """Derived from the declarations: lo and hi accepted (lo excluded when open), just outside refused."""
    from dataclasses import fields

    from specbench.config import _INTEGER_OPTIONS
    from specbench.errors import SpecbenchError

    bounded = [f for f in fields(EngineConfig) if f.metadata["bounds"] is not None]
    assert len(bounded) >= 12
    base = {"method": "ngram", "max_num_steps": 1, "ngram_max": 64}
    for f in bounded:
        bounds: Range = f.metadata["bounds"]
        step = 1 if f.name in _INTEGER_OPTIONS else bounds.hi * 1e-3
        tuple_field = f.metadata["parse"] is not None

        def make(value, name=f.name, is_tuple=tuple_field):
            return EngineConfig(**{**base, name: (value,) if is_tuple else value})

        inside = [bounds.hi] + ([] if bounds.lo_open else [bounds.lo])
        for value in inside:
            if f.name == "max_num_steps" and value > 1:
                continue  # needs the synthetic rates to cover it; covered by the other bound
            make(int(value) if f.name in _INTEGER_OPTIONS else value)
        for value in (bounds.lo - step if not bounds.lo_open else bounds.lo, bounds.hi + step, math.nan):
            with pytest.raises(SpecbenchError, match=f.name):
                make(int(value) if f.name in _INTEGER_OPTIONS and not math.isnan(value) else value)


# ---- model config.json: `generate --load-format dummy --target DIR` (nothing but a config) ----

GOOD_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
    "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
}

CONFIG_CASES = [
    ("list", "[1, 2, 3]", "JSON object"),
    ("string", '"hello"', "JSON object"),
    ("not_json", "{hidden_size: 64", "malformed JSON"),
    ("deep", DEEP, "nested too deeply"),
    ("huge_int", '{"vocab_size": ' + "9" * 5000 + "}", "malformed JSON"),
    ("hidden_1e9", {"hidden_size": 10**9}, "hidden_size"),
    ("layers_1e6", {"num_hidden_layers": 10**6}, "num_hidden_layers"),
    ("vocab_1e12", {"vocab_size": 10**12}, "vocab_size"),
    ("eps_nan", {"rms_norm_eps": math.nan}, "rms_norm_eps"),
    ("eps_zero", {"rms_norm_eps": 0}, "rms_norm_eps"),
    ("theta_nan", {"rope_theta": math.nan}, "rope_theta"),
    ("theta_inf", {"rope_theta": math.inf}, "rope_theta"),
    ("heads_zero", {"num_attention_heads": 0}, "num_attention_heads"),
    ("kv_heads_not_divisor", {"num_key_value_heads": 3}, "num_key_value_heads"),
    ("hidden_text", {"hidden_size": "sixty-four"}, "hidden_size"),
    ("hidden_float", {"hidden_size": 64.5}, "hidden_size"),
    ("architectures_string", {"architectures": "LlamaForCausalLM"}, "architectures"),
    ("eos_strings", {"eos_token_id": ["a"]}, "eos_token_id"),
    ("rope_scaling_list", {"rope_scaling": [1, 2]}, "rope_scaling"),
    ("rope_factor_nan", {"rope_scaling": {"rope_type": "linear", "factor": math.nan}}, "factor"),
    ("missing_vocab", {"vocab_size": None}, "vocab_size"),
    # Within every per-field bound, yet ~2.6e13 parameters: refused against the device's memory, before allocating.
    ("absurd_total", {"hidden_size": 2**16, "num_hidden_layers": 1024, "intermediate_size": 2**18,
                      "num_attention_heads": 1024, "num_key_value_heads": 1024}, "parameters"),
]


def _write_config(directory, content) -> None:
    directory.mkdir()
    if isinstance(content, dict):
        merged = {k: v for k, v in {**GOOD_CONFIG, **content}.items() if v is not None}
        content = json.dumps(merged)  # NaN/Infinity literals, as Python's json writes them
    (directory / "config.json").write_text(content)


@pytest.mark.parametrize("name, content, expected", CONFIG_CASES, ids=[c[0] for c in CONFIG_CASES])
def test_bad_model_config_is_one_error(name, content, expected, tmp_path):
    model = tmp_path / name
    _write_config(model, content)
    result = run_main("generate", "-p", "hi", "--device", "cpu", "--load-format", "dummy", "--target", str(model))
    assert_one_clean_error(result, expected)


def test_bad_config_in_a_real_model_dir_is_refused_before_weights(tmp_path):
    _write_config(tmp_path / "m", {"rms_norm_eps": math.nan})
    result = run_main("generate", "-p", "hi", "--device", "cpu", "--target", str(tmp_path / "m"))
    assert_one_clean_error(result, "rms_norm_eps", "config.json")


def test_context_beyond_the_trained_one_is_refused(tmp_path):
    _write_config(tmp_path / "m", {})
    result = run_main("generate", "-p", "hi", "--device", "cpu", "--load-format", "dummy",
                      "--target", str(tmp_path / "m"), "--max-model-len", "4096")
    assert_one_clean_error(result, "--max-model-len", "128")


# ---- prompt files: `sweep -w file:PATH` refuses them before the model load and before any run directory ----

PROMPT_CASES = [
    ("deep_row", '{"prompt": "ok"}\n{"messages": ' + DEEP + "}\n", "line 2"),
    ("deep_array", "[" + DEEP + "]", "nested too deeply"),
    ("messages_string", '{"messages": "hi"}', "messages"),
    ("messages_strings", '{"messages": ["hi", "there"]}', "messages[0]"),
    ("content_list", '{"messages": [{"role": "user", "content": ["x"]}]}', "messages[0].content"),
    ("content_number", '{"messages": [{"role": "user", "content": 5}]}', "messages[0].content"),
    ("role_unknown", '{"messages": [{"role": "root", "content": "x"}]}', "messages[0].role"),
    ("max_tokens_huge", '{"prompt": "x", "max_tokens": ' + str(10**30) + "}", "max_tokens"),
    ("temperature_nan", '{"prompt": "x", "temperature": NaN}', "temperature"),
    ("int_too_long", '{"prompt": "x", "max_tokens": ' + "9" * 5000 + "}", "line 1"),
    ("top_level_number", "5", "JSON object"),
    ("empty", "\n\n", "no rows"),
    ("not_utf8", b"\xff\xfe{}", "UTF-8"),
]


@pytest.mark.parametrize("name, content, expected", PROMPT_CASES, ids=[c[0] for c in PROMPT_CASES])
def test_bad_prompt_file_is_one_error(name, content, expected, tmp_path):
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    results = tmp_path / "results"
    result = run_main("sweep", "-w", f"file:{path}", "--target", NOWHERE, "--device", "cpu",
                      "--results-dir", str(results), "-q")
    assert_one_clean_error(result, str(path), expected)
    assert not results.exists()


# ---- manifests: `sweep --resume DIR` and `compare DIR DIR` ----

def _manifest(**override):
    manifest = {"schema_version": SCHEMA_VERSION, "run_id": "r1", "config": {"workload": "gsm8k"},
                "workload": {"name": "gsm8k", "version": "1", "data_sha256": "ab" * 32, "num_samples": 4}}
    return json.dumps({k: v for k, v in {**manifest, **override}.items() if v is not None})


MANIFEST_CASES = [
    ("list", "[]", "JSON object"),
    ("string", '"manifest"', "JSON object"),
    ("not_json", "{", "manifest.json"),
    ("deep", DEEP, "nested too deeply"),
    ("no_schema", "{}", "schema_version"),
    ("missing_config", _manifest(config=None), "config"),
    ("config_list", _manifest(config=[1]), "config"),
    ("workload_list", _manifest(workload=["gsm8k"]), "workload"),
    ("workload_missing_sha", _manifest(workload={"name": "gsm8k", "version": "1"}), "workload.data_sha256"),
    ("run_id_number", _manifest(run_id=5), "run_id"),
    ("versions_list", _manifest(versions=["torch"]), "versions"),
    ("goodput_numbers", _manifest(config={"goodput": [1, 2]}), "goodput"),
    ("cells_number", _manifest(cells=3), "cells"),
]
RESUME_ONLY = [
    ("config_block_size_nan", _manifest(config={"block_size": math.nan}), "block_size"),
    ("config_concurrency_number", _manifest(config={"concurrency": 5}), "config"),
    ("config_unknown_field", _manifest(config={"bogus": 1}), "bogus"),
]


@pytest.mark.parametrize("name, content, expected", MANIFEST_CASES + RESUME_ONLY,
                         ids=[c[0] for c in MANIFEST_CASES + RESUME_ONLY])
def test_bad_manifest_on_resume_is_one_error(name, content, expected, tmp_path):
    run = tmp_path / "results" / "r1"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(content)
    result = run_main("sweep", "--resume", str(run), "-q")
    assert_one_clean_error(result, str(run), expected)
    assert [p.name for p in run.iterdir()] == ["manifest.json"]
    assert (run / "manifest.json").read_text() == content  # not rewritten


@pytest.mark.parametrize("name, content, expected", MANIFEST_CASES, ids=[c[0] for c in MANIFEST_CASES])
def test_bad_manifest_in_compare_is_one_error(name, content, expected, tmp_path):
    runs = []
    for side in ("before", "after"):
        run = tmp_path / side
        run.mkdir()
        (run / "manifest.json").write_text(content if side == "before" else _manifest())
        runs.append(str(run))
    assert_one_clean_error(run_main("compare", *runs), runs[0], expected)


# ---- EAGLE head config.json: refused before any head weight is read ----

EAGLE_CASES = [
    ("list", "[]", "JSON object"),
    ("draft_vocab_text", {"draft_vocab_size": "many"}, "draft_vocab_size"),
    ("target_hidden_huge", {"target_hidden_size": 10**9}, "target_hidden_size"),
    ("eagle_config_list", {"eagle_config": [1]}, "eagle_config"),
]


@pytest.mark.parametrize("name, content, expected", EAGLE_CASES, ids=[c[0] for c in EAGLE_CASES])
def test_bad_eagle_head_config_is_one_error(name, content, expected, tmp_path):
    from specbench.errors import SpecbenchError
    from specbench.speculation.drafters.eagle.checkpoint import read_checkpoint

    head = tmp_path / name
    _write_config(head, content)  # no weights: the config must be refused first
    with pytest.raises(SpecbenchError) as err:
        read_checkpoint(str(head), allow_pickle=False)
    assert expected in str(err.value) and "config.json" in str(err.value) and "\n" not in str(err.value)
