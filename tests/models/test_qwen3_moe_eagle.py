"""EAGLE-3 on a Qwen3-MoE target: a head fitted to the tiny MoE target's own features (tests/support/eagle_heads.py,
disk-cached) drafts through the engine; greedy output == HF transformers' generate, with and without preemption.

(The selftest's hand-built head, specbench/selftest/tiny_eagle.py, takes the selftest target's dense layers apart
and cannot be built for a MoE target.)
"""

from __future__ import annotations

import pytest
import torch
from tests.support.eagle_heads import HeadVariant, acceptance_per_pos, fitted_tensors, run_engine, write_head
from tests.support.tiny_models import build_tiny_model, gsm8k_questions, load_tiny_tokenizer

from specbench.spec.eagle.config import EAGLE3_SPECULATORS
from specbench.spec.eagle.writer import HeadFormat

MAX_TOKENS = 24  # run_engine's
PREEMPTING_KV_BLOCKS = 26  # cannot hold 4 concurrent requests of up to 40 + 24 + k tokens
pytestmark = pytest.mark.slow  # the head's one-off fit takes ~35 s on 2 cores (then it is read from .cache/)
VARIANT = HeadVariant("qwen3-moe", "e3-moe", "eagle3", HeadFormat(EAGLE3_SPECULATORS))


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3_moe_eagle")
    build_tiny_model(root / "target", "qwen3_moe", seed=0, num_experts=8, num_experts_per_tok=2,
                     moe_intermediate_size=32, norm_topk_prob=True)
    write_head(root / "head", fitted_tensors(root / "target", VARIANT.recipe), VARIANT, root / "target")
    return root / "target", root / "head"


@pytest.fixture(scope="module")
def prompt_ids() -> list[list[int]]:
    tok = load_tiny_tokenizer()
    lengths = [6, 40, 13, 27, 9, 33]
    return [tok(q)["input_ids"][:n] for q, n in zip(gsm8k_questions("test")[:6], lengths)]


@pytest.fixture(scope="module")
def hf_greedy(dirs, prompt_ids):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(dirs[0], dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None
    outs = []
    for ids in prompt_ids:
        x = torch.tensor([ids])
        y = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=MAX_TOKENS, do_sample=False,
                           pad_token_id=0)
        outs.append(y[0, len(ids):].tolist())
    return outs


@pytest.mark.parametrize("is_preempting", [False, True], ids=["roomy", "preempting"])
def test_eagle3_greedy_matches_hf(dirs, prompt_ids, hf_greedy, is_preempting):
    target, head = dirs
    pool = {"num_kv_blocks": PREEMPTING_KV_BLOCKS} if is_preempting else {"kv_cache_gb": 0.25}
    llm, outs = run_engine(target, prompt_ids, method="eagle3", draft=str(head), max_num_steps=3, **pool)
    assert llm.engine.proposer.describe()["dialect"] == VARIANT.dialect
    assert [list(o.output_token_ids) for o in outs] == hf_greedy
    assert (sum(o.stats.num_preemptions for o in outs) > 0) == is_preempting
    # Measured 0.53 / 0.29 / 0.19 per position; a head fed the wrong features (or none) drafts near 0.
    rates = acceptance_per_pos(outs)
    assert rates[0] > 0.3, rates
