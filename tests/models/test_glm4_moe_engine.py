"""GLM-4.5-style MoE through the engine: greedy output == HF transformers' Glm4MoeForCausalLM (fp32, CPU), plain
and speculative (n-gram, a perturbed GLM draft) with and without preemption. The tiny target has what GLM-4.5 has:
a dense first layer (first_k_dense_replace), sigmoid routing with a score-correction bias and routed_scaling_factor,
a shared expert, q/k/v bias without o_proj bias, q/k norm, and RoPE on half of each head.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from tests.support.tiny_models import build_tiny_model, derive_draft

from specbench import LLM, SamplingParams
from specbench.errors import SpecbenchError
from specbench.models.config import ModelConfig
from specbench.models.layers import RotaryEmbedding
from specbench.models.loader import load_model
from specbench.models.partial_rotary import head_dim_order
from tests.support.hf_greedy import hf_greedy_outputs, tiny_prompt_ids

MAX_TOKENS = 20
PREEMPTING_KV_BLOCKS = 20  # cannot hold 4 concurrent requests of up to 33 + 20 + k tokens
GLM = {"n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "n_shared_experts": 1,
       "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "routed_scaling_factor": 2.5,
       "attention_bias": True, "use_qk_norm": True, "rope_scaling": {"partial_rotary_factor": 0.5}}


@pytest.fixture(scope="module")
def glm_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("glm4_moe")
    model = build_tiny_model(root / "target", "glm4_moe", seed=0, **GLM)
    with torch.no_grad():  # a bias that changes which experts win (transformers initialises it to zero)
        model.model.layers[1].mlp.gate.e_score_correction_bias.copy_(0.1 * torch.randn(8))
    model.save_pretrained(root / "target")
    derive_draft(root / "target", root / "draft", noise=0.1, seed=1)
    return root / "target", root / "draft"


@pytest.fixture(scope="module")
def prompt_ids() -> list[list[int]]:
    return tiny_prompt_ids()


@pytest.fixture(scope="module")
def hf_greedy(glm_dirs, prompt_ids) -> list[list[int]]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(glm_dirs[0], dtype=torch.float32).eval()
    assert model.model.layers[1].mlp.gate.e_score_correction_bias.abs().min() > 0
    return hf_greedy_outputs(model, prompt_ids, MAX_TOKENS)


@pytest.mark.parametrize(("method", "is_preempting"), [("none", False), ("ngram", True), ("draft", False),
                                                       ("draft", True)])
def test_greedy_matches_hf(glm_dirs, prompt_ids, hf_greedy, method, is_preempting):
    target, draft = glm_dirs
    kwargs = {"num_kv_blocks": PREEMPTING_KV_BLOCKS} if is_preempting else {"kv_cache_gb": 0.25}
    if method != "none":
        kwargs.update(method=method, max_num_steps=3, ngram_min=1, ngram_max=3)
    if method == "draft":
        kwargs["draft"] = str(draft)
    llm = LLM(str(target), dtype="fp32", device="cpu", block_size=4, max_concurrency=4, **kwargs)
    outs = llm.generate(prompt_ids, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    assert [list(o.output_token_ids) for o in outs] == hf_greedy
    assert (sum(o.stats.num_preemptions for o in outs) > 0) == is_preempting
    if method != "none":
        assert sum(o.stats.num_accepted_tokens for o in outs) > 0


def test_config(glm_dirs):
    hf = json.loads((glm_dirs[0] / "config.json").read_text())
    config = ModelConfig.from_hf(hf)
    assert config.architecture == "glm4_moe" and config.moe_layer_ids == (1,) and config.rotary_dim == 8
    assert config.use_qk_norm and config.attention_bias and not config.has_o_proj_bias
    moe = config.moe
    assert (moe.scoring, moe.norm_topk_prob, moe.routed_scaling_factor, moe.shared_intermediate_size) == (
        "sigmoid", True, 2.5, 32) and moe.has_score_correction_bias
    with pytest.raises(SpecbenchError, match="group-limited expert selection \\(n_group 8, topk_group 4\\)"):
        ModelConfig.from_hf({**hf, "n_group": 8, "topk_group": 4})
    full = {**hf, "rope_parameters": {**hf["rope_parameters"], "partial_rotary_factor": 1.0}}
    assert ModelConfig.from_hf(full).rotary_dim is None


def test_param_count_matches_hf(glm_dirs):
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(glm_dirs[0])
    assert ModelConfig.from_hf(json.loads((glm_dirs[0] / "config.json").read_text())).num_params() == sum(
        p.numel() for p in hf.parameters())


def test_partial_rope_on_permuted_heads_is_hf_rope_permuted():
    """Full-width rotate-half RoPE with zero frequencies on the moved pass-through dims == HF's partial RoPE."""
    from transformers.models.glm4_moe.modeling_glm4_moe import apply_rotary_pos_emb

    head_dim, rotary_dim, theta = 16, 8, 10000.0
    positions = torch.arange(0, 40, 3)
    x = torch.randn(len(positions), 2, head_dim)
    inv_freq = 1.0 / theta ** (torch.arange(0, rotary_dim, 2).float() / rotary_dim)
    emb = torch.cat([torch.outer(positions.float(), inv_freq)] * 2, dim=-1)  # [n, rotary_dim]
    expected, _ = apply_rotary_pos_emb(x.transpose(0, 1), x.transpose(0, 1), emb.cos(), emb.sin(), unsqueeze_dim=0)
    rope = RotaryEmbedding(head_dim, theta, None, rotary_dim)
    order = head_dim_order(head_dim, rotary_dim)
    got = RotaryEmbedding.apply(x[..., order], rope.cos_sin(positions, 64))
    torch.testing.assert_close(got, expected.transpose(0, 1)[..., order], atol=1e-6, rtol=1e-6)


@torch.no_grad()
def test_fused_layout_and_mtp_layer_load(glm_dirs, tmp_path):
    """transformers 5's stacked expert tensors load as the per-expert ones do; an MTP layer after the decoder's
    (as the hub's GLM-4.5 checkpoints carry) is skipped."""
    from transformers import AutoModelForCausalLM

    target = glm_dirs[0]
    state = {k: v.contiguous() for k, v in AutoModelForCausalLM.from_pretrained(target).state_dict().items()}
    assert "model.layers.1.mlp.experts.gate_up_proj" in state
    state["model.layers.2.eh_proj.weight"] = torch.zeros(64, 128)  # the MTP layer's projection
    save_file(state, tmp_path / "model.safetensors", metadata={"format": "pt"})
    (tmp_path / "config.json").write_text((target / "config.json").read_text())
    per_expert = load_model(str(target), dtype="fp32", device="cpu", attn_backend="torch").model
    fused = load_model(str(tmp_path), dtype="fp32", device="cpu", attn_backend="torch").model
    for (name, a), (_, b) in zip(per_expert.state_dict().items(), fused.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    bias = load_file(target / "model.safetensors")["model.layers.1.mlp.gate.e_score_correction_bias"]
    assert torch.equal(fused.layers[1].mlp.score_correction_bias, bias)


def test_dummy_preset():
    from specbench.models.presets import get_preset

    air = get_preset("glm-4.5-air")
    assert round(air.num_params() / 1e9) == 107 and air.rotary_dim == 64
