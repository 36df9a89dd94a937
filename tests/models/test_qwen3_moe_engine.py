"""Qwen3-MoE through the engine: greedy output == HF transformers' own Qwen3MoeForCausalLM (fp32, CPU), plain and
with every drafter, with and without preemption; both expert layouts load; the config is read as transformers
builds the model.

The target is a tiny random checkpoint built on the fly by transformers itself (tests/support/tiny_models.py):
2 layers, hidden 64, 8 experts of width 32, top 2, renormalised.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file
from tests.support.tiny_models import build_tiny_model, derive_draft

from specbench import LLM, SamplingParams
from specbench.errors import SpecbenchError
from specbench.models.config import ModelConfig
from specbench.models.loader import load_model
from tests.support.hf_greedy import hf_greedy_outputs, tiny_prompt_ids

MAX_TOKENS = 20
# 20 blocks of 4 tokens cannot hold 4 concurrent requests of up to 33 + 20 + k tokens: forces preemption.
PREEMPTING_KV_BLOCKS = 20
MOE = {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "norm_topk_prob": True}


@pytest.fixture(scope="module")
def moe_dirs(tmp_path_factory):
    """(target, perturbed MoE draft, dense Qwen3 draft) checkpoint directories, one tokenizer."""
    root = tmp_path_factory.mktemp("qwen3_moe")
    build_tiny_model(root / "target", "qwen3_moe", seed=0, **MOE)
    derive_draft(root / "target", root / "moe_draft", noise=0.1, seed=1)
    build_tiny_model(root / "dense_draft", "qwen3", num_layers=1, seed=5)
    return root / "target", root / "moe_draft", root / "dense_draft"


@pytest.fixture(scope="module")
def prompt_ids() -> list[list[int]]:
    return tiny_prompt_ids()


@pytest.fixture(scope="module")
def hf_greedy(moe_dirs, prompt_ids) -> list[list[int]]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(moe_dirs[0], dtype=torch.float32).eval()
    assert type(model.model.layers[0].mlp).__name__ == "Qwen3MoeSparseMoeBlock"
    return hf_greedy_outputs(model, prompt_ids, MAX_TOKENS)


def _run(target, prompts, **kwargs):
    llm = LLM(str(target), dtype="fp32", device="cpu", block_size=4, max_concurrency=4, **kwargs)
    return llm.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))


def test_plain_matches_hf(moe_dirs, prompt_ids, hf_greedy):
    outs = _run(moe_dirs[0], prompt_ids)
    assert [list(o.output_token_ids) for o in outs] == hf_greedy


@pytest.mark.parametrize("is_preempting", [False, True], ids=["roomy", "preempting"])
@pytest.mark.parametrize("method", ["ngram", "draft-moe", "draft-dense"])
def test_speculative_matches_hf(moe_dirs, prompt_ids, hf_greedy, method, is_preempting):
    target, moe_draft, dense_draft = moe_dirs
    kwargs = {"max_num_steps": 3, "ngram_min": 1, "ngram_max": 3}
    if method == "ngram":
        kwargs["method"] = "ngram"
    else:
        kwargs.update(method="draft", draft=str(moe_draft if method == "draft-moe" else dense_draft))
    if is_preempting:
        kwargs["num_kv_blocks"] = PREEMPTING_KV_BLOCKS
    else:
        kwargs["kv_cache_gb"] = 0.25
    outs = _run(target, prompt_ids, **kwargs)
    assert [list(o.output_token_ids) for o in outs] == hf_greedy
    num_preemptions = sum(o.stats.num_preemptions for o in outs)
    assert (num_preemptions > 0) == is_preempting, num_preemptions
    drafted = sum(o.stats.num_draft_tokens for o in outs)
    accepted = sum(o.stats.num_accepted_tokens for o in outs)
    assert drafted > 0
    if method == "draft-moe":
        # A perturbed copy of the target (its routing perturbed too): neither broken nor identical.
        assert 0.3 < accepted / drafted < 0.98, accepted / drafted


def _hf_config(directory) -> dict:
    return json.loads((directory / "config.json").read_text())


def test_config_layers_follow_sparse_step_and_mlp_only_layers(moe_dirs):
    hf = _hf_config(moe_dirs[0])
    base = ModelConfig.from_hf(hf)
    assert base.architecture == "qwen3_moe" and base.use_qk_norm
    assert base.moe_layer_ids == (0, 1) and base.moe.num_experts == 8 and base.moe.norm_topk_prob
    assert ModelConfig.from_hf({**hf, "mlp_only_layers": [0]}).moe_layer_ids == (1,)
    assert ModelConfig.from_hf({**hf, "num_hidden_layers": 4, "decoder_sparse_step": 2}).moe_layer_ids == (1, 3)
    dense = ModelConfig.from_hf({**hf, "mlp_only_layers": [0, 1]})
    assert dense.moe is None and dense.moe_layer_ids == ()
    # transformers < 5 spells the expert count `num_experts`; 5 writes `num_local_experts`.
    old = {k: v for k, v in hf.items() if k != "num_local_experts"} | {"num_experts": 8}
    assert ModelConfig.from_hf(old).moe == base.moe
    with pytest.raises(SpecbenchError, match="'num_experts' \\(4\\) and 'num_local_experts' \\(8\\) disagree"):
        ModelConfig.from_hf({**hf, "num_experts": 4})
    with pytest.raises(SpecbenchError, match="missing required field 'moe_intermediate_size'"):
        ModelConfig.from_hf({k: v for k, v in hf.items() if k != "moe_intermediate_size"})


def test_param_count_counts_experts_as_hf_does(moe_dirs):
    from transformers import AutoModelForCausalLM

    hf = _hf_config(moe_dirs[0])
    for overrides in ({}, {"mlp_only_layers": [1]}):
        model = AutoModelForCausalLM.from_config(type(AutoModelForCausalLM.from_pretrained(moe_dirs[0]).config)(
            **{**hf, **overrides}))
        config = ModelConfig.from_hf({**hf, **overrides})
        assert config.num_params() == sum(p.numel() for p in model.parameters())


def test_refused_checkpoint_says_why():
    hf = {"vocab_size": 64, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_local_experts": 4, "num_experts_per_tok": 2}
    with pytest.raises(SpecbenchError, match="^MXFP4-quantized checkpoints are not supported"):
        ModelConfig.from_hf({**hf, "architectures": ["GptOssForCausalLM"],
                             "quantization_config": {"quant_method": "mxfp4"}})


@torch.no_grad()
def test_fused_expert_layout_loads_the_same_weights(moe_dirs, tmp_path):
    """A checkpoint holding transformers 5's stacked `experts.gate_up_proj` / `experts.down_proj` tensors (a raw
    state_dict) loads into the same model as the per-expert one `save_pretrained` writes."""
    from transformers import AutoModelForCausalLM

    target = moe_dirs[0]
    hf = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)
    state = {k: v.contiguous() for k, v in hf.state_dict().items()}
    assert "model.layers.0.mlp.experts.gate_up_proj" in state  # the in-memory layout this test means
    save_file(state, tmp_path / "model.safetensors", metadata={"format": "pt"})
    (tmp_path / "config.json").write_text((target / "config.json").read_text())
    per_expert = load_model(str(target), dtype="fp32", device="cpu", attn_backend="torch").model
    fused = load_model(str(tmp_path), dtype="fp32", device="cpu", attn_backend="torch").model
    for (name, a), (_, b) in zip(per_expert.state_dict().items(), fused.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    mlp = fused.layers[1].mlp
    torch.testing.assert_close(mlp.gate_up_weight, hf.model.layers[1].mlp.experts.gate_up_proj, rtol=0, atol=0)
    torch.testing.assert_close(mlp.router.weight, hf.model.layers[1].mlp.gate.weight, rtol=0, atol=0)


def test_missing_expert_is_named(moe_dirs, tmp_path):
    from safetensors.torch import load_file

    target = moe_dirs[0]
    weights = load_file(target / "model.safetensors")
    del weights["model.layers.1.mlp.experts.5.up_proj.weight"]
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    (tmp_path / "config.json").write_text((target / "config.json").read_text())
    with pytest.raises(SpecbenchError, match="missing weight 'model.layers.1.mlp.experts.5.up_proj.weight'"):
        load_model(str(tmp_path), dtype="fp32", device="cpu", attn_backend="torch")


def test_dummy_presets():
    from specbench.models.presets import get_preset

    big = get_preset("qwen3-30b-a3b")
    assert round(big.num_params() / 1e9, 1) == 30.5 and round(big.num_active_params() / 1e9, 1) == 3.4
    outs = _run("tiny-qwen3-moe", [[5, 6, 7, 8]], load_format="dummy")
    assert len(outs[0].output_token_ids) == MAX_TOKENS
