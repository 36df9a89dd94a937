"""EAGLE-3 on the MoE targets (Qwen3-MoE, Mixtral, GLM-4.5-style): a head fitted to each tiny target's own features
(tests/support/eagle_heads.py, disk-cached) drafts through the engine; greedy output == HF transformers' generate,
with and without preemption.

(The selftest's hand-built head, specbench/selftest/tiny_eagle.py, takes the selftest target's dense layers apart
and cannot be built for a MoE target.)
"""

from __future__ import annotations

import pytest
import torch
from tests.support.eagle_heads import HeadVariant, acceptance_per_pos, fitted_tensors, run_engine, write_head
from tests.support.tiny_models import build_tiny_model, gsm8k_questions, load_tiny_tokenizer

from specbench.speculation.drafters.eagle.config import EAGLE3_SPECULATORS
from specbench.speculation.drafters.eagle.writer import HeadFormat
from tests.support.hf_greedy import hf_greedy_outputs

MAX_TOKENS = 24  # run_engine's
PREEMPTING_KV_BLOCKS = 26  # cannot hold 4 concurrent requests of up to 40 + 24 + k tokens
pytestmark = pytest.mark.slow  # each head's one-off fit takes ~35 s on 2 cores (then it is read from .cache/)
VARIANT = HeadVariant("moe", "e3-moe", "eagle3", HeadFormat(EAGLE3_SPECULATORS))
# architecture -> build_tiny_model's MoE arguments (2 layers, 8 or 4 experts, top 2)
TARGETS = {
    "qwen3_moe": {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "norm_topk_prob": True},
    "mixtral": {"intermediate": 48, "num_local_experts": 4, "num_experts_per_tok": 2},
    "glm4_moe": {"n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "n_shared_experts": 1,
                 "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "routed_scaling_factor": 2.5,
                 "attention_bias": True, "use_qk_norm": True, "rope_scaling": {"partial_rotary_factor": 0.5}},
}


@pytest.fixture(scope="module", params=sorted(TARGETS))
def dirs(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"{request.param}_eagle")
    build_tiny_model(root / "target", request.param, seed=0, **TARGETS[request.param])
    write_head(root / "head", fitted_tensors(root / "target", VARIANT.recipe), VARIANT, root / "target")
    return root / "target", root / "head"


@pytest.fixture(scope="module")
def prompt_ids() -> list[list[int]]:
    tok = load_tiny_tokenizer()
    lengths = [6, 40, 13, 27, 9, 33]
    return [tok(q)["input_ids"][:n] for q, n in zip(gsm8k_questions("test")[:6], lengths)]


@pytest.fixture(scope="module")
def hf_greedy(dirs, prompt_ids):  # per target (`dirs` is parametrized)
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(dirs[0], dtype=torch.float32).eval()
    return hf_greedy_outputs(model, prompt_ids, MAX_TOKENS)


@pytest.mark.parametrize("is_preempting", [False, True], ids=["roomy", "preempting"])
def test_eagle3_greedy_matches_hf(dirs, prompt_ids, hf_greedy, is_preempting):
    target, head = dirs
    pool = {"num_kv_blocks": PREEMPTING_KV_BLOCKS} if is_preempting else {"kv_cache_gb": 0.25}
    llm, outs = run_engine(target, prompt_ids, method="eagle3", draft=str(head), max_num_steps=3, **pool)
    assert llm.engine.proposer.describe()["dialect"] == VARIANT.dialect
    assert [list(o.output_token_ids) for o in outs] == hf_greedy
    assert (sum(o.stats.num_preemptions for o in outs) > 0) == is_preempting
    # Measured at the first position: Qwen3-MoE 0.53, Mixtral 0.62-0.67, GLM 0.59-0.61; a head fed the wrong
    # features (or none) drafts near 0.
    rates = acceptance_per_pos(outs)
    assert rates[0] > 0.3, rates
