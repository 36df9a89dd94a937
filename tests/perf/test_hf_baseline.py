"""HF transformers baseline on a tiny Llama (CPU, fp32, compile off): exact token counts, sane timings, and the
same greedy tokens from the dynamic and the static cache."""

from __future__ import annotations

import json
import math

import pytest
import torch

from specbench.perf.hf_baseline import (
    build_hf_model,
    greedy_generate,
    hf_llama_config,
    main,
    random_prompts,
    run_hf_baseline,
)
from specbench.errors import SpecbenchError
from specbench.models.presets import get_preset

TINY = get_preset("tiny-llama")  # 2 layers, hidden 64


@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_results_count_every_generated_token(cache):
    results = run_hf_baseline(TINY, batch_sizes=[1, 3], prompt_len=16, output_len=10, cache=cache,
                              device="cpu", dtype=torch.float32)
    assert [r.batch_size for r in results] == [1, 3]
    for r in results:
        assert r.cache == cache and not r.is_compiled
        assert r.num_output_tokens == r.batch_size * 10
        assert r.total_s > 0 and r.compile_s >= 0 and r.peak_mem_gb is None
        assert math.isclose(r.output_tokens_per_s, r.num_output_tokens / r.total_s)


def test_dynamic_and_static_cache_give_the_same_greedy_tokens():
    model = build_hf_model(TINY, device="cpu", dtype=torch.float32, seed=3)
    prompts = random_prompts(3, 12, TINY.vocab_size, "cpu", seed=1)
    dynamic = greedy_generate(model, prompts, 24, cache="dynamic", compile=False)
    static = greedy_generate(model, prompts, 24, cache="static", compile=False)
    assert dynamic.shape == (3, 24)
    assert torch.equal(dynamic, static)
    assert len(set(dynamic.flatten().tolist())) > 5  # not a degenerate repeat of one token


def test_eos_never_stops_generation_early():
    model = build_hf_model(TINY, device="cpu", dtype=torch.float32)
    prompts = random_prompts(1, 8, TINY.vocab_size, "cpu")
    free = greedy_generate(model, prompts, 6, cache="dynamic", compile=False)
    eos = int(free[0, 1])  # greedy decoding emits it second: a stopping generate would end there
    model.generation_config.eos_token_id = eos
    forced = greedy_generate(model, prompts, 6, cache="dynamic", compile=False)
    assert forced.shape == (1, 6) and eos not in forced[0, :6].tolist()


def test_hf_config_matches_the_preset():
    hf = hf_llama_config(get_preset("llama-3.1-8b"))
    assert (hf.hidden_size, hf.num_hidden_layers, hf.num_key_value_heads, hf.head_dim) == (4096, 32, 8, 128)
    assert hf.rope_parameters["rope_type"] == "llama3" and hf.rope_parameters["factor"] == 8.0
    with pytest.raises(SpecbenchError, match="Llama"):
        hf_llama_config(get_preset("tiny-qwen3"))


def test_bad_cache_and_compile_requests_fail_clearly():
    model = build_hf_model(TINY, device="cpu", dtype=torch.float32)
    prompts = random_prompts(1, 4, TINY.vocab_size, "cpu")
    with pytest.raises(SpecbenchError, match="dynamic, static"):
        greedy_generate(model, prompts, 2, cache="paged", compile=False)
    with pytest.raises(SpecbenchError, match="static"):
        greedy_generate(model, prompts, 2, cache="dynamic", compile=True)
    with pytest.raises(SpecbenchError, match="CUDA"):
        greedy_generate(model, prompts, 2, cache="static", compile=True)


def test_script_entry_prints_a_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "hf.json"
    rc = main(["--preset", "tiny-llama", "--batch-sizes", "1,2", "--prompt-len", "8", "--output-len", "4",
               "--cache", "static", "--device", "cpu", "--dtype", "fp32", "--json", str(out)])
    assert rc == 0
    table = capsys.readouterr().out
    assert "tok/s" in table and "static" in table
    run = json.loads(out.read_text())
    assert run["preset"] == "tiny-llama" and run["output_len"] == 4
    assert [r["num_output_tokens"] for r in run["results"]] == [4, 8]
    assert main(["--preset", "tiny-llama", "--batch-sizes", "0", "--device", "cpu"]) == 2
