"""The MoE layer's torch reference == HF transformers' own MoE blocks on the same fp32 weights, every routing variant.

Each HF block is built from a tiny config (no hub), its weights drawn at random and copied into ours (gpt-oss's
interleaved, transposed expert tensors through the layout converters the loader will use).
"""

from __future__ import annotations

import pytest
import torch
from transformers import (
    Glm4MoeConfig,
    GptOssConfig,
    MixtralConfig,
    Qwen2MoeConfig,
    Qwen3MoeConfig,
)
from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeMoE
from transformers.models.gpt_oss.modeling_gpt_oss import GptOssMLP
from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock
from transformers.models.qwen2_moe.modeling_qwen2_moe import Qwen2MoeSparseMoeBlock
from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

from specbench.models.moe import (
    MoeMLP,
    down_from_transposed,
    gate_up_bias_from_interleaved,
    gate_up_from_interleaved,
)
from specbench.models.moe_config import MoeConfig

HIDDEN, NUM_EXPERTS, TOP_K, INTER, SHARED_INTER = 32, 8, 2, 48, 40
NUM_TOKENS = 24
TOL = {"atol": 2e-6, "rtol": 2e-5}


def _hf_config(config_cls, **kwargs):
    config = config_cls(hidden_size=HIDDEN, num_experts_per_tok=TOP_K, hidden_act="silu", **kwargs)
    config._experts_implementation = "eager"  # the loop over experts, not a grouped-mm integration
    return config


def _randomize(block: torch.nn.Module, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in [*block.parameters(), *block.buffers()]:
            tensor.copy_(torch.randn(tensor.shape, generator=gen) * tensor.shape[-1] ** -0.5)


def _copy_shared(ours: MoeMLP, gate_proj, up_proj, down_proj) -> None:
    ours.shared_expert.gate_up_proj.weight.copy_(torch.cat([gate_proj.weight, up_proj.weight]))
    ours.shared_expert.down_proj.weight.copy_(down_proj.weight)


def mixtral():
    hf = MixtralSparseMoeBlock(_hf_config(MixtralConfig, num_local_experts=NUM_EXPERTS, intermediate_size=INTER))
    return hf, MoeConfig(HIDDEN, NUM_EXPERTS, TOP_K, INTER, scoring="softmax", norm_topk_prob=True)


def qwen3_moe(norm_topk_prob: bool):
    hf = Qwen3MoeSparseMoeBlock(_hf_config(Qwen3MoeConfig, num_experts=NUM_EXPERTS, moe_intermediate_size=INTER,
                                           norm_topk_prob=norm_topk_prob))
    return hf, MoeConfig(HIDDEN, NUM_EXPERTS, TOP_K, INTER, scoring="softmax", norm_topk_prob=norm_topk_prob)


def qwen2_moe():
    hf = Qwen2MoeSparseMoeBlock(_hf_config(Qwen2MoeConfig, num_experts=NUM_EXPERTS, moe_intermediate_size=INTER,
                                           shared_expert_intermediate_size=SHARED_INTER, norm_topk_prob=False))
    return hf, MoeConfig(HIDDEN, NUM_EXPERTS, TOP_K, INTER, scoring="softmax", norm_topk_prob=False,
                         shared_intermediate_size=SHARED_INTER, is_shared_expert_gated=True)


def gpt_oss():
    hf = GptOssMLP(_hf_config(GptOssConfig, num_local_experts=NUM_EXPERTS, intermediate_size=INTER))
    return hf, MoeConfig(HIDDEN, NUM_EXPERTS, TOP_K, INTER, scoring="topk_softmax", norm_topk_prob=False,
                         has_router_bias=True, has_expert_bias=True, activation="swiglu_oai",
                         swiglu_alpha=hf.experts.alpha, swiglu_limit=hf.experts.limit)


def glm4_moe(norm_topk_prob: bool):
    hf = Glm4MoeMoE(_hf_config(Glm4MoeConfig, n_routed_experts=NUM_EXPERTS, moe_intermediate_size=INTER,
                               n_shared_experts=1, n_group=1, topk_group=1, routed_scaling_factor=2.5,
                               norm_topk_prob=norm_topk_prob))
    return hf, MoeConfig(HIDDEN, NUM_EXPERTS, TOP_K, INTER, scoring="sigmoid", norm_topk_prob=norm_topk_prob,
                         routed_scaling_factor=2.5, has_score_correction_bias=True, shared_intermediate_size=INTER)


VARIANTS = {
    "mixtral": mixtral,
    "qwen3-moe": lambda: qwen3_moe(True),
    "qwen3-moe-unnormalised": lambda: qwen3_moe(False),
    "qwen2-moe-gated-shared": qwen2_moe,
    "gpt-oss": gpt_oss,
    "glm4-moe": lambda: glm4_moe(True),
    "glm4-moe-unnormalised": lambda: glm4_moe(False),
}


@torch.no_grad()
def copy_weights(name: str, hf: torch.nn.Module, ours: MoeMLP) -> None:
    if name == "gpt-oss":
        ours.router.weight.copy_(hf.router.weight)
        ours.router.bias.copy_(hf.router.bias)
        ours.gate_up_weight.copy_(gate_up_from_interleaved(hf.experts.gate_up_proj))
        ours.gate_up_bias.copy_(gate_up_bias_from_interleaved(hf.experts.gate_up_proj_bias))
        ours.down_weight.copy_(down_from_transposed(hf.experts.down_proj))
        ours.down_bias.copy_(hf.experts.down_proj_bias)
        return
    ours.router.weight.copy_(hf.gate.weight)
    ours.gate_up_weight.copy_(hf.experts.gate_up_proj)
    ours.down_weight.copy_(hf.experts.down_proj)
    if name.startswith("glm4"):
        ours.score_correction_bias.copy_(hf.gate.e_score_correction_bias)
        _copy_shared(ours, hf.shared_experts.gate_proj, hf.shared_experts.up_proj, hf.shared_experts.down_proj)
    if name.startswith("qwen2"):
        _copy_shared(ours, hf.shared_expert.gate_proj, hf.shared_expert.up_proj, hf.shared_expert.down_proj)
        ours.shared_expert_gate.weight.copy_(hf.shared_expert_gate.weight)


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def pair(request):
    hf, config = VARIANTS[request.param]()
    _randomize(hf, seed=len(request.param))
    if request.param == "gpt-oss":
        with torch.no_grad():
            hf.experts.gate_up_proj.mul_(8.0)  # pre-activations past the swiglu limit: the clamps are exercised
    ours = MoeMLP(config)
    copy_weights(request.param, hf, ours)
    return request.param, hf.eval(), ours.eval()


def _x(seed: int = 0) -> torch.Tensor:
    return torch.randn(NUM_TOKENS, HIDDEN, generator=torch.Generator().manual_seed(seed))


@torch.no_grad()
def test_reference_matches_hf_block(pair):
    name, hf, ours = pair
    x = _x()
    expected = hf(x[None])
    expected = expected[0] if isinstance(expected, tuple) else expected  # gpt-oss also returns its router scores
    torch.testing.assert_close(ours(x), expected[0], **TOL)
    if name == "gpt-oss":  # the comparison covers the clamps
        assert (x @ hf.experts.gate_up_proj[0]).abs().max() > ours.config.swiglu_limit


@torch.no_grad()
def test_routing_matches_hf_router(pair):
    # Same experts and weights per token (HF may list a token's k experts in another order).
    name, hf, ours = pair
    x = _x(seed=1)
    router = hf.router if name == "gpt-oss" else hf.gate
    _, hf_weights, hf_ids = router(x)
    routing = ours.route(x)
    hf_order, order = hf_ids.argsort(dim=-1), routing.topk_ids.argsort(dim=-1)
    assert torch.equal(hf_ids.gather(1, hf_order), routing.topk_ids.gather(1, order))
    torch.testing.assert_close(routing.topk_weights.gather(1, order), hf_weights.float().gather(1, hf_order), **TOL)


@torch.no_grad()
def test_correction_bias_selects_but_does_not_weigh():
    # A large bias on one expert makes every token pick it, yet its weight is its plain sigmoid score.
    _, config = glm4_moe(norm_topk_prob=False)
    ours = MoeMLP(config)
    ours.score_correction_bias[3] = 100.0
    x = _x(seed=2)
    routing = ours.route(x)
    assert (routing.topk_ids == 3).any(dim=-1).all()
    scores = torch.sigmoid(x @ ours.router.weight.T)
    torch.testing.assert_close(routing.topk_weights, 2.5 * scores.gather(1, routing.topk_ids))


@torch.no_grad()
def test_padded_rows_route_nowhere_and_do_not_touch_real_rows():
    _, config = qwen2_moe()
    torch.manual_seed(0)
    ours = MoeMLP(config)
    x = _x(seed=3)
    is_real = torch.arange(NUM_TOKENS) < 5
    garbage = x.clone()
    garbage[5:] = float("nan")
    routing = ours.route(garbage, is_real)
    assert (routing.topk_ids[5:] == NUM_EXPERTS).all() and (routing.topk_weights[5:] == 0).all()
    assert torch.equal(routing.topk_ids[:5], ours.route(x[:5]).topk_ids)
    # Close, not equal: the router and shared-expert GEMMs over 24 rows may sum in another order than over 5.
    torch.testing.assert_close(ours(garbage, is_real)[:5], ours(x[:5]), **TOL)


def test_config_refuses_unknown_names_and_contradictions():
    from specbench.errors import SpecbenchError

    with pytest.raises(SpecbenchError, match="supported: softmax, sigmoid, topk_softmax"):
        MoeConfig(HIDDEN, NUM_EXPERTS, TOP_K, INTER, scoring="relu")
    with pytest.raises(SpecbenchError, match="supported: silu, swiglu_oai"):
        MoeConfig(HIDDEN, NUM_EXPERTS, TOP_K, INTER, activation="gelu")
    with pytest.raises(SpecbenchError, match="top-k"):
        MoeConfig(HIDDEN, NUM_EXPERTS, NUM_EXPERTS + 1, INTER)
    with pytest.raises(SpecbenchError, match="already normalises"):
        MoeConfig(HIDDEN, NUM_EXPERTS, TOP_K, INTER, scoring="topk_softmax", norm_topk_prob=True)
    with pytest.raises(SpecbenchError, match="sigmoid"):
        MoeConfig(HIDDEN, NUM_EXPERTS, TOP_K, INTER, has_score_correction_bias=True)
    with pytest.raises(SpecbenchError, match="gated shared expert"):
        MoeConfig(HIDDEN, NUM_EXPERTS, TOP_K, INTER, is_shared_expert_gated=True)


def test_correction_bias_stays_fp32_through_a_cast():
    _, config = glm4_moe(norm_topk_prob=True)
    ours = MoeMLP(config)
    ours.score_correction_bias.fill_(1 + 2 ** -20)  # not representable in bf16
    ours.to(torch.bfloat16)
    assert ours.score_correction_bias.dtype == torch.float32 and ours.gate_up_weight.dtype == torch.bfloat16
    assert (ours.score_correction_bias == 1 + 2 ** -20).all()
