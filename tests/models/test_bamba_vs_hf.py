"""A Mamba-2 hybrid target (Bamba: Mamba-2 mixers beside plain full attention) through the engine: greedy output ==
HF transformers' own BambaForCausalLM (fp32, CPU), plain and with n-gram speculation at k = 3 (scripted drafts that
reject at every position, accept all, or draft none, mixed in each batch), draft-LM and EAGLE-3 (a dummy head over
the target's aux hidden states: drafts rejected, the rollback exercised) speculation, 10 concurrent
requests, preemption, chunked prefill; the state oracle (INV-STATE) after every step. The Mamba-2 state rides on the
same slots, verify-kept positions and commit as Qwen3-Next's Gated DeltaNet state
(tests/models/test_hybrid_vs_hf.py).

The target is a tiny random checkpoint built on the fly by transformers (tests/support/tiny_bamba.py).
"""

from __future__ import annotations

import json

import pytest
import torch

from tests.support.hf_greedy import hf_greedy_of, tiny_prompt_ids
from tests.support.hybrid_runs import (MAMBA2_PATHS, MAX_TOKENS, NGRAM, PROMPT_LENGTHS, hybrid_llm, output_tokens,
                                       record_commits, run_with_oracle)
from tests.support.scripted_drafts import install_scripted
from tests.support.tiny_bamba import build_tiny_bamba
from tests.support.tiny_models import build_tiny_model

from specbench import SamplingParams
from specbench.models.config import ModelConfig
from specbench.selftest.hf_reference import hf_reference_mismatch
from specbench.speculation.drafters.eagle.dummy import write_dummy_eagle3_head

@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("bamba")
    model = build_tiny_bamba(root / "target", seed=0)
    assert type(model.model.layers[0].mamba).__name__ == "BambaMixer"
    build_tiny_model(root / "draft", "qwen3", num_layers=1, seed=5)
    config = ModelConfig.from_hf(json.loads((root / "target" / "config.json").read_text()))
    write_dummy_eagle3_head(config, root / "eagle3", draft_vocab_size=config.vocab_size)  # over the aux states
    return root


@pytest.fixture(scope="module")
def prompts():
    return tiny_prompt_ids(PROMPT_LENGTHS)


@pytest.fixture(scope="module")
def hf_greedy(dirs, prompts):
    mismatch = hf_reference_mismatch(str(dirs / "target"))
    if mismatch is not None:  # the GPU image's transformers: its Bamba is not the engine's model
        pytest.skip(f"no HF reference: {mismatch}")
    return hf_greedy_of(dirs / "target", prompts, MAX_TOKENS)


def test_config_reads_as_transformers_builds_it(dirs):
    from transformers import AutoModelForCausalLM

    config = ModelConfig.from_hf(json.loads((dirs / "target" / "config.json").read_text()))
    model = AutoModelForCausalLM.from_pretrained(dirs / "target", dtype=torch.float32)
    assert config.is_hybrid and config.architecture == "bamba" and config.rotary_dim == 8  # half of head_dim 16
    assert [k.name for k in config.attention_kinds] == ["mamba2", "full"] * 2
    assert config.num_kv_layers == 2
    assert config.state_layout.recurrent_dims == (8, 16, 16)  # [heads, head_dim, state_size]
    assert config.num_params() == sum(p.numel() for p in model.parameters())


def test_plain_decode_matches_hf_and_the_state_oracle(dirs, prompts, hf_greedy):
    llm = hybrid_llm(dirs / "target")
    outs, worst, num_checked = run_with_oracle(llm, prompts)
    assert output_tokens(outs) == hf_greedy
    assert num_checked > 0 and worst < 1e-4, worst
    assert MAMBA2_PATHS - {"hybrid.state_commit"} <= llm.engine.paths_taken()


def test_rejection_at_every_position_matches_hf_and_the_state_oracle(dirs, prompts, hf_greedy):
    """n-gram rounds at k = 3 whose drafts are HF's continuation spoiled at a cycling position: rounds accept 0..3
    drafts or draft none, zero-draft requests committed beside drafting ones; the output is still HF's and every
    slot equals the recomputation after every step."""
    llm = hybrid_llm(dirs / "target", **NGRAM)
    commits = record_commits(llm)
    script = install_scripted(llm, prompts, hf_greedy)
    outs, worst, num_checked = run_with_oracle(llm, prompts)
    assert output_tokens(outs) == hf_greedy
    assert script.accepted_lengths == {-1, 0, 1, 2, 3}
    assert any(0 in c and max(c) > 0 for c in commits), commits
    assert num_checked > 0 and worst < 1e-4, worst
    assert MAMBA2_PATHS <= llm.engine.paths_taken()


@pytest.mark.parametrize("case", ["ngram", "draft", "eagle3", "ngram-preempting", "ngram-chunked"])
def test_speculation_matches_hf(dirs, prompts, hf_greedy, case):
    kwargs = dict(NGRAM) if case.startswith("ngram") else {"method": case, "draft": str(dirs / case),
                                                           "max_num_steps": 3}
    if case.endswith("preempting"):
        kwargs["num_kv_blocks"] = 40  # 10 requests of up to 33 + 12 + 3 tokens in 160 slots: preemption
    if case.endswith("chunked"):  # prompt chunks carry the Mamba-2 state from one to the next, beside verify rows
        kwargs.update(enable_chunked_prefill=True, max_num_batched_tokens=16)
    llm = hybrid_llm(dirs / "target", **kwargs)
    if case.startswith("ngram"):
        install_scripted(llm, prompts, hf_greedy)
    outs = llm.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    assert output_tokens(outs) == hf_greedy
    assert sum(o.stats.num_draft_tokens for o in outs) > 0
    if case.endswith("preempting"):
        assert sum(o.stats.num_preemptions for o in outs) > 0


def test_forced_acceptance_keeps_the_state_oracle(dirs, prompts):
    """Draft-LM rounds accepted at forced rates (every accepted length): the slot after each step still equals a
    recomputation from the committed tokens."""
    llm = hybrid_llm(dirs / "target", method="draft", draft=str(dirs / "draft"), max_num_steps=3,
                     synthetic_acceptance=(0.8, 0.6, 0.5))
    outs, worst, num_checked = run_with_oracle(llm, prompts[:6], max_tokens=8, every=2)
    assert sum(o.stats.num_accepted_tokens for o in outs) > 10
    assert num_checked > 0 and worst < 1e-4, worst


def test_an_unknown_architecture_lists_bamba_among_the_supported(tmp_path):
    from specbench.errors import SpecbenchError
    from specbench.models.config import ModelConfig

    with pytest.raises(SpecbenchError, match=r"unsupported architecture 'JambaForCausalLM'; supported: .*"
                                             r"BambaForCausalLM.*NemotronHForCausalLM"):
        ModelConfig.from_hf({"architectures": ["JambaForCausalLM"]})


def test_tree_drafts_are_refused_on_mamba2_layers(dirs):
    """The Mamba-2 mixer verifies chains only (its kind says so): a tree is one clear error, not a wrong state."""
    from specbench.errors import SpecbenchError
    from specbench.speculation.draft_shape import DraftShape

    llm = hybrid_llm(dirs / "target", method="draft", draft=str(dirs / "draft"), max_num_steps=3)
    with pytest.raises(SpecbenchError, match="tree drafts need layers that verify trees .*Mamba-2"):
        llm.engine.set_draft_shape(DraftShape(2, 4))
