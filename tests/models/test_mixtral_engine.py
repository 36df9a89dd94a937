"""Mixtral through the engine: greedy output == HF transformers' MixtralForCausalLM (fp32, CPU), plain and
speculative (n-gram, a perturbed Mixtral draft) with preemption; its `block_sparse_moe.experts.E.w1/w2/w3` names
and transformers 5's fused expert tensors both load. Tiny: 2 layers, hidden 64, 4 experts of width 48, top 2.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file
from tests.support.tiny_models import build_tiny_model, derive_draft

from specbench import LLM, SamplingParams
from specbench.attention.kinds import SlidingWindowAttention
from specbench.models.config import ModelConfig
from specbench.models.loader import load_model
from tests.support.hf_greedy import hf_greedy_outputs, tiny_prompt_ids

MAX_TOKENS = 20
PREEMPTING_KV_BLOCKS = 20  # cannot hold 4 concurrent requests of up to 33 + 20 + k tokens


@pytest.fixture(scope="module")
def mixtral_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixtral")
    build_tiny_model(root / "target", "mixtral", seed=0, intermediate=48, num_local_experts=4,
                     num_experts_per_tok=2)
    derive_draft(root / "target", root / "draft", noise=0.1, seed=1)
    return root / "target", root / "draft"


@pytest.fixture(scope="module")
def prompt_ids() -> list[list[int]]:
    return tiny_prompt_ids()


@pytest.fixture(scope="module")
def hf_greedy(mixtral_dirs, prompt_ids) -> list[list[int]]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(mixtral_dirs[0], dtype=torch.float32).eval()
    return hf_greedy_outputs(model, prompt_ids, MAX_TOKENS)


@pytest.mark.parametrize("method", ["none", "ngram", "draft"])
def test_greedy_matches_hf(mixtral_dirs, prompt_ids, hf_greedy, method):
    target, draft = mixtral_dirs
    kwargs = {} if method == "none" else {"method": method, "max_num_steps": 3, "ngram_min": 1, "ngram_max": 3,
                                           "num_kv_blocks": PREEMPTING_KV_BLOCKS}
    if method == "draft":
        kwargs["draft"] = str(draft)
    llm = LLM(str(target), dtype="fp32", device="cpu", block_size=4, max_concurrency=4,
              **({"kv_cache_gb": 0.25} if method == "none" else {}), **kwargs)
    outs = llm.generate(prompt_ids, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    assert [list(o.output_token_ids) for o in outs] == hf_greedy
    if method != "none":
        assert sum(o.stats.num_preemptions for o in outs) > 0
        assert sum(o.stats.num_accepted_tokens for o in outs) > 0


def test_preset_counts_all_experts():
    from specbench.models.presets import get_preset

    config = get_preset("mixtral-8x7b")
    assert round(config.num_params() / 1e9, 1) == 46.7 and round(config.num_active_params() / 1e9, 1) == 12.9


def test_config_and_refusals(mixtral_dirs):
    hf = json.loads((mixtral_dirs[0] / "config.json").read_text())
    config = ModelConfig.from_hf(hf)
    assert config.architecture == "mixtral" and config.moe_layer_ids == (0, 1) and not config.use_qk_norm
    assert config.moe.moe_intermediate_size == 48 and config.moe.norm_topk_prob and config.moe.num_experts == 4
    assert config.attention_kinds == ()  # no window: every layer full attention
    assert ModelConfig.from_hf({**hf, "sliding_window": 64}).attention_kinds == (SlidingWindowAttention(64),) * 2


@torch.no_grad()
def test_fused_expert_layout_loads_the_same_weights(mixtral_dirs, tmp_path):
    from transformers import AutoModelForCausalLM

    target = mixtral_dirs[0]
    state = {k: v.contiguous() for k, v in AutoModelForCausalLM.from_pretrained(target).state_dict().items()}
    assert "model.layers.0.mlp.experts.gate_up_proj" in state
    save_file(state, tmp_path / "model.safetensors", metadata={"format": "pt"})
    (tmp_path / "config.json").write_text((target / "config.json").read_text())
    per_expert = load_model(str(target), dtype="fp32", device="cpu", attn_backend="torch").model
    fused = load_model(str(tmp_path), dtype="fp32", device="cpu", attn_backend="torch").model
    for (name, a), (_, b) in zip(per_expert.state_dict().items(), fused.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
