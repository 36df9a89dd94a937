"""load_model: every source kind, and one clear SpecbenchError for each way a checkpoint can be wrong."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file
from tests.support.tiny_models import write_sharded

from specbench.attention import build_metadata
from specbench.errors import SpecbenchError
from specbench.kv.kv_cache import KVCache
from specbench.models import load_model, parse_dtype

CPU = torch.device("cpu")


def load(source, **kwargs):
    kwargs.setdefault("dtype", torch.float32)
    return load_model(str(source), device=CPU, attn_backend="torch", **kwargs)


def prefill_logits(model, ids: list[int]) -> torch.Tensor:
    kv = KVCache(model.kv_cache_spec(), 8, 4, CPU)
    md = build_metadata(positions=list(range(len(ids))), num_query=[len(ids)], seq_lens=[len(ids)],
                        block_tables=[[5, 2, 7, 0]], block_size=4, device=CPU)
    with torch.no_grad():
        return model.compute_logits(model(torch.tensor(ids), md, kv).hidden_states)


@pytest.fixture(scope="module")
def reference(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    ids = [17, 400, 9, 1000, 3, 250, 77, 8, 64, 512, 31, 2]
    with torch.no_grad():
        return ids, hf(torch.tensor([ids])).logits[0]


def copy_with_weights(src, dst, edit) -> None:
    """Copy an HF dir, rewriting model.safetensors through `edit(state_dict)`."""
    shutil.copytree(src, dst)
    state = load_file(dst / "model.safetensors")
    edit(state)
    save_file(state, dst / "model.safetensors", metadata={"format": "pt"})


def test_single_safetensors(tiny_model_dir, reference):
    ids, ref = reference
    loaded = load(tiny_model_dir, dtype="auto")
    assert loaded.model.dtype == torch.float32  # "auto" = the checkpoint's dtype
    assert (prefill_logits(loaded.model, ids) - ref).abs().max() < 1e-4
    info = loaded.info
    assert info.kind == "hf_dir" and info.weight_files == ("model.safetensors",)
    assert info.weights_sha256 == hashlib.sha256((tiny_model_dir / "model.safetensors").read_bytes()).hexdigest()
    assert loaded.tokenizer is not None and loaded.tokenizer.eos_token == "<|im_end|>"
    assert loaded.config.num_hidden_layers == 2


def test_sharded_safetensors(tiny_model_dir, reference, tmp_path):
    sharded = write_sharded(tiny_model_dir, tmp_path / "sharded", max_shard_bytes=64 * 1024)
    loaded = load(sharded)
    assert len(loaded.info.weight_files) > 2
    assert (prefill_logits(loaded.model, reference[0]) - reference[1]).abs().max() < 1e-4
    assert loaded.info.weights_sha256 != load(tiny_model_dir).info.weights_sha256

    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    (sharded / sorted(set(index["weight_map"].values()))[1]).unlink()
    with pytest.raises(SpecbenchError, match="shard model-00002-of-.* is missing"):
        load(sharded)


def test_dummy_presets_are_seeded_and_finite():
    a = load("tiny-qwen3", load_format="dummy", seed=3)
    b = load("tiny-qwen3", load_format="dummy", seed=3)
    c = load("tiny-qwen3", load_format="dummy", seed=4)
    assert a.info.kind == "dummy" and a.info.preset == "tiny-qwen3" and a.info.weights_sha256 is None
    assert a.tokenizer is None
    ids = [1, 5, 9, 200, 7]
    la, lb, lc = (prefill_logits(x.model, ids) for x in (a, b, c))
    assert torch.isfinite(la).all() and torch.equal(la, lb) and not torch.equal(la, lc)
    bf16 = load("tiny-llama", load_format="dummy", dtype="auto")
    assert bf16.model.dtype == torch.float32  # tiny presets declare fp32
    with pytest.raises(SpecbenchError, match="neither a preset .*llama-3.1-8b"):
        load("no-such-preset", load_format="dummy")


def test_dummy_from_hf_dir_and_config_path(tiny_model_dir):
    from_dir = load(tiny_model_dir, load_format="dummy", dtype="bf16")
    assert from_dir.tokenizer is not None and from_dir.model.dtype == torch.bfloat16
    from_json = load(tiny_model_dir / "config.json", load_format="dummy")
    assert from_json.config == from_dir.config == load(tiny_model_dir).config
    assert torch.isfinite(prefill_logits(from_dir.model, [4, 8, 15, 16, 23, 42])).all()


@pytest.mark.slow  # initializes ~0.4B parameters (~6 s on 1 core)
def test_dummy_8b_width_stays_finite_in_bf16():
    # A 2-layer slice of Llama-3.1-8B's widths (small vocab): the dummy init must not overflow bf16.
    from dataclasses import replace

    from specbench.attention import create_backend
    from specbench.models import DecoderLM, get_preset

    config = replace(get_preset("llama-3.1-8b"), num_hidden_layers=2, vocab_size=512)
    model = DecoderLM(config, create_backend("torch"), torch.bfloat16, CPU)
    model.init_random_weights(seed=0)
    logits = prefill_logits(model, list(range(0, 512, 37)))
    assert torch.isfinite(logits).all() and 0.1 < logits.std().item() < 100


def test_pickle_weights_need_allow_pickle(tiny_model_dir, reference, tmp_path):
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    shutil.copy(tiny_model_dir / "config.json", pickled / "config.json")
    torch.save(load_file(tiny_model_dir / "model.safetensors"), pickled / "pytorch_model.bin")
    with pytest.raises(SpecbenchError, match="pickle.*allow-pickle"):
        load(pickled)
    loaded = load(pickled, allow_pickle=True)
    assert (prefill_logits(loaded.model, reference[0]) - reference[1]).abs().max() < 1e-4
    assert loaded.tokenizer is None


def test_path_errors(tiny_model_dir, tmp_path, monkeypatch):
    with pytest.raises(SpecbenchError, match="does not exist"):
        load(tmp_path / "nowhere")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    with pytest.raises(SpecbenchError, match="does not exist locally and the Hugging Face hub could not be reached"):
        load("specbench-tests/not-a-model")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecbenchError, match="has no config.json"):
        load(tmp_path / "empty")
    (tmp_path / "no_weights").mkdir()
    shutil.copy(tiny_model_dir / "config.json", tmp_path / "no_weights" / "config.json")
    with pytest.raises(SpecbenchError, match="no weights"):
        load(tmp_path / "no_weights")
    with pytest.raises(SpecbenchError, match="is a file"):
        load(tiny_model_dir / "config.json")
    with pytest.raises(SpecbenchError, match="unknown dtype 'int3'"):
        load(tiny_model_dir, dtype="int3")


def test_unsupported_architecture(tiny_model_dir, tmp_path):
    from transformers import GPT2Config

    shutil.copytree(tiny_model_dir, tmp_path / "gpt2")
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4).to_dict()
    config["architectures"] = ["GPT2LMHeadModel"]
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps(config))
    with pytest.raises(SpecbenchError, match="unsupported architecture 'GPT2LMHeadModel'; supported: .*LlamaForCausalLM"):
        load(tmp_path / "gpt2")


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: s.pop("model.layers.1.mlp.up_proj.weight"), "missing weight 'model.layers.1.mlp.up_proj.weight'"),
        (lambda s: s.pop("lm_head.weight"), "missing weight 'lm_head.weight'"),
        (lambda s: s.update({"model.layers.2.input_layernorm.weight": torch.ones(64)}),
         "unexpected weight 'model.layers.2.input_layernorm.weight'"),
        (lambda s: s.update({"model.layers.0.self_attn.q_proj.bias": torch.zeros(64)}),
         "unexpected weight 'model.layers.0.self_attn.q_proj.bias'"),
        (lambda s: s.update({"model.layers.0.self_attn.k_proj.weight": torch.zeros(64, 64)}),
         r"'model.layers.0.self_attn.k_proj.weight' has shape \(64, 64\), the model expects \(32, 64\)"),
    ],
)
def test_bad_checkpoint_keys_are_named(tiny_model_dir, tmp_path, edit, message):
    copy_with_weights(tiny_model_dir, tmp_path / "bad", edit)
    with pytest.raises(SpecbenchError, match=message):
        load(tmp_path / "bad")


def test_inv_freq_buffers_are_ignored(tiny_model_dir, reference, tmp_path):
    copy_with_weights(tiny_model_dir, tmp_path / "old",
                      lambda s: s.update({"model.layers.0.self_attn.rotary_emb.inv_freq": torch.ones(8)}))
    assert (prefill_logits(load(tmp_path / "old").model, reference[0]) - reference[1]).abs().max() < 1e-4


def test_parse_dtype():
    assert parse_dtype("bf16") == parse_dtype("bfloat16") == torch.bfloat16
    assert parse_dtype("FP16") == parse_dtype("torch.float16") == torch.float16
    assert parse_dtype("fp32") == parse_dtype("float32") == torch.float32
    assert parse_dtype("auto") is None
    with pytest.raises(SpecbenchError, match="supported: auto"):
        parse_dtype("fp8")
