"""The `mtp` proposer through the engine on tiny targets shipping an MTP module in each dialect's real key names:
a dense Llama-like target with Qwen3-Next's `mtp.*` and a GLM-4.5-style MoE target with its `model.layers.{L}.*`
(a MoE decoder layer). Greedy output is the plain engine's (fp32), with and without preemption; every draft step's
logits match the oracle's cache-free recomputation, which catches the module being fed the wrong position's hidden
state while greedy output stays exact."""

from __future__ import annotations

import pytest
import torch

from specbench import LLM, SamplingParams
from specbench.check.engine_defaults import check_engine
from specbench.check.oracle import FP32_RTOL, record_and_compare
from specbench.check.reference import build_reference_drafting_llm
from specbench.check.sampled import check_sampled
from specbench.check.setup import CheckSetup
from specbench.faults.catalog import injection
from specbench.selftest.tiny import build_tiny_pair, random_prompts
from specbench.selftest.tiny_mtp import LAYER_INDEX, MTP_PREFIX, build_mtp_target
from tests.support.tiny_models import build_tiny_model

MAX_TOKENS = 16
PREEMPTING_KV_BLOCKS = 14  # cannot hold 4 concurrent requests of up to 30 + 16 + k tokens in blocks of 4
GLM = {"n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "n_shared_experts": 1,
       "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "routed_scaling_factor": 2.5,
       "attention_bias": True, "use_qk_norm": True, "rope_scaling": {"partial_rotary_factor": 0.5}}


@pytest.fixture(scope="module", params=["dense-mtp-prefix", "glm-layer-index"])
def target(request, tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp(request.param)
    if request.param == "dense-mtp-prefix":
        base, _ = build_tiny_pair(root / "pair", seed=0)
        return build_mtp_target(base, root / "target", MTP_PREFIX)
    model = build_tiny_model(root / "base", "glm4_moe", seed=0, **GLM)
    with torch.no_grad():  # a bias that changes which experts win
        model.model.layers[1].mlp.gate.e_score_correction_bias.copy_(0.1 * torch.randn(8))
    model.save_pretrained(root / "base")
    return build_mtp_target(root / "base", root / "target", LAYER_INDEX)


@pytest.fixture(scope="module")
def prompts(target) -> list[list[int]]:
    return random_prompts(4, seed=0, vocab_size=500, max_len=30)


@pytest.fixture(scope="module")
def plain_outputs(target, prompts) -> list[list[int]]:
    llm = LLM(target, dtype="fp32", device="cpu", block_size=4, max_concurrency=4, kv_cache_gb=0.05)
    return [list(o.output_token_ids) for o in llm.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS,
                                                                                    ignore_eos=True))]


def _mtp_llm(target: str, is_preempting: bool, **options) -> LLM:
    pool = {"num_kv_blocks": PREEMPTING_KV_BLOCKS} if is_preempting else {"kv_cache_gb": 0.05}
    return LLM(target, dtype="fp32", device="cpu", block_size=4, max_concurrency=4, method="mtp", max_num_steps=3,
               **pool, **options)


@pytest.mark.parametrize("is_preempting", [False, True], ids=["roomy", "preempting"])
def test_greedy_matches_plain_engine(target, prompts, plain_outputs, is_preempting):
    llm = _mtp_llm(target, is_preempting)
    outs = llm.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    assert [list(o.output_token_ids) for o in outs] == plain_outputs
    assert (sum(o.stats.num_preemptions for o in outs) > 0) == is_preempting
    assert sum(o.stats.num_draft_tokens for o in outs) > 0
    described = llm.engine.proposer.describe()
    assert described["method"] == "mtp" and described["dialect"] in (MTP_PREFIX, LAYER_INDEX)
    assert described["moe_layer"] == (llm.engine.runner.model.config.moe is not None)


@pytest.mark.parametrize("inject", [None, "mtp-hidden-wrong-position"])
def test_oracle_recomputes_every_draft_step(target, prompts, plain_outputs, inject):
    llm = _mtp_llm(target, True, fault=injection(inject))
    reference = build_reference_drafting_llm(llm.engine.config)
    params = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True)
    num, bad = record_and_compare(llm, reference, prompts, params, FP32_RTOL)
    assert num > 0
    if inject is None:
        assert bad == []
    else:  # the mutant's drafts differ from the module's on the right hidden, yet greedy output is exact
        assert len(bad) > num // 4, bad[:3]
        outs = llm.generate(prompts, params)
        assert [list(o.output_token_ids) for o in outs] == plain_outputs


@pytest.mark.slow  # the GLM target's MoE layers in eager torch: ~30 s on 2 busy cores
def test_sampled_check_passes(target, prompts):
    setup = CheckSetup(check_engine(target=target, method="mtp", max_num_steps=3, dtype="fp32", device="cpu"),
                       tuple(tuple(p) for p in prompts[:2]))
    result = check_sampled(setup, num_samples=100)
    assert result.passed, result.detail
