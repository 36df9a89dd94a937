"""A Nemotron-H target (one mixer per block: Mamba-2, attention without RoPE, relu^2 MLP) through the engine: greedy
output == HF transformers' own NemotronHForCausalLM (fp32, CPU), plain, with n-gram speculation at k = 3 (scripted
drafts rejecting at every position), a draft LM and EAGLE-3, 10 concurrent requests, preemption, chunked prefill,
prefix-cache hits on a shared system prompt; the state oracle (INV-STATE) after every step; a state-rollback mutant
caught.

The engine's layers group each mixer block with the MLP blocks after it (models/config_nemotron_h.py); the Mamba-2
state rides on Bamba's mixer and slots (tests/models/test_bamba_vs_hf.py). The target is a tiny random checkpoint
built on the fly by transformers (tests/support/tiny_nemotron_h.py).
"""

from __future__ import annotations

import json

import pytest
import torch

from tests.support.hf_greedy import hf_greedy_of, hf_greedy_outputs, tiny_prompt_ids
from tests.support.hybrid_prefix import MAX_TOKENS as PREFIX_MAX_TOKENS, hit_tokens, run_waves
from tests.support.hybrid_runs import (MAMBA2_PATHS, MAX_TOKENS, NGRAM, PROMPT_LENGTHS, hybrid_llm, output_tokens,
                                       run_with_oracle)
from tests.support.scripted_drafts import install_scripted
from tests.support.tiny_models import build_tiny_model
from tests.support.tiny_nemotron_h import PATTERN, build_tiny_nemotron_h

from specbench import SamplingParams
from specbench.errors import SpecbenchError
from specbench.faults import injection
from specbench.models.config import ModelConfig
from specbench.speculation.drafters.eagle.dummy import write_dummy_eagle3_head

@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("nemotron_h")
    model = build_tiny_nemotron_h(root / "target", seed=0)
    build_tiny_model(root / "draft", "qwen3", num_layers=1, seed=5)
    return root, model


@pytest.fixture(scope="module")
def prompts():
    return tiny_prompt_ids(PROMPT_LENGTHS)


@pytest.fixture(scope="module")
def hf_greedy(dirs, prompts):
    return hf_greedy_of(dirs[0] / "target", prompts, MAX_TOKENS)


def _config(root) -> dict:
    return json.loads((root / "target" / "config.json").read_text())


def test_config_reads_as_transformers_builds_it(dirs):
    root, model = dirs
    config = ModelConfig.from_hf(_config(root))
    assert config.architecture == "nemotron_h" and config.is_hybrid and not config.has_rope
    assert PATTERN == "M-*-M-" and config.nemotron_blocks == ("M-", "*-", "M-")
    assert [k.name for k in config.attention_kinds] == ["mamba2", "full", "mamba2"]
    assert config.num_kv_layers == 1
    assert config.state_layout.recurrent_dims == (8, 16, 16)  # [heads, head_dim, state_size]
    assert config.mamba2.num_groups == 2 and config.mamba2.intermediate_size == 128
    assert config.num_params() == sum(p.numel() for p in model.parameters())


def test_nvidia_style_config_reads_the_same(dirs):
    """NVIDIA's released configs: `hybrid_override_pattern`, num_hidden_layers (the blocks'), attention_head_dim;
    MLP blocks before the first mixer run in the first layer."""
    root, _ = dirs
    hf = _config(root)
    nvidia = {k: v for k, v in hf.items() if k not in ("layers_block_type", "head_dim")}
    nvidia.update(hybrid_override_pattern=PATTERN, num_hidden_layers=len(PATTERN), attention_head_dim=16)
    assert ModelConfig.from_hf(nvidia) == ModelConfig.from_hf(hf)
    lead = ModelConfig.from_hf(dict(nvidia, hybrid_override_pattern="--M*M-"))
    assert lead.nemotron_blocks == ("--M", "*", "M-") and lead.num_hidden_layers == 3


def test_moe_blocks_are_one_clear_error(dirs):
    root, _ = dirs
    with pytest.raises(SpecbenchError, match="Nemotron-H MoE blocks .* not supported"):
        ModelConfig.from_hf(dict(_config(root), layers_block_type=["linear_attention", "moe", "full_attention"]))


def test_plain_decode_matches_hf_and_the_state_oracle(dirs, prompts, hf_greedy):
    llm = hybrid_llm(dirs[0] / "target")
    outs, worst, num_checked = run_with_oracle(llm, prompts)
    assert output_tokens(outs) == hf_greedy
    assert num_checked > 0 and worst < 1e-4, worst
    assert MAMBA2_PATHS - {"hybrid.state_commit"} <= llm.engine.paths_taken()


def test_rejection_at_every_position_matches_hf_and_the_state_oracle(dirs, prompts, hf_greedy):
    """Scripted n-gram rounds at k = 3 accepting 0..3 drafts or drafting none: HF's output, every slot equal to a
    recomputation after every step."""
    llm = hybrid_llm(dirs[0] / "target", **NGRAM)
    script = install_scripted(llm, prompts, hf_greedy)
    outs, worst, num_checked = run_with_oracle(llm, prompts)
    assert output_tokens(outs) == hf_greedy
    assert script.accepted_lengths == {-1, 0, 1, 2, 3}
    assert num_checked > 0 and worst < 1e-4, worst
    assert MAMBA2_PATHS <= llm.engine.paths_taken()


@pytest.mark.parametrize("case", ["draft", "eagle3"])
def test_draft_lm_and_eagle3_match_hf(dirs, prompts, hf_greedy, case):
    """A draft LM, and EAGLE-3 (a dummy head over the engine layers' aux hidden states: drafts rejected, the
    rollback exercised)."""
    root, _ = dirs
    if case == "eagle3" and not (root / "eagle3").exists():
        config = ModelConfig.from_hf(_config(root))
        write_dummy_eagle3_head(config, root / "eagle3", draft_vocab_size=config.vocab_size)
    llm = hybrid_llm(root / "target", method=case, draft=str(root / case), max_num_steps=3)
    outs = llm.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    assert output_tokens(outs) == hf_greedy
    assert sum(o.stats.num_draft_tokens for o in outs) > 0


@pytest.mark.parametrize("case", ["preempting", "chunked"])
def test_speculation_matches_hf(dirs, prompts, hf_greedy, case):
    kwargs = dict(NGRAM)
    if case == "preempting":
        kwargs["num_kv_blocks"] = 40  # 10 requests of up to 33 + 12 + 3 tokens in 160 slots: preemption
    else:  # prompt chunks carry the Mamba-2 state from one to the next, beside verify rows
        kwargs.update(enable_chunked_prefill=True, max_num_batched_tokens=16)
    llm = hybrid_llm(dirs[0] / "target", **kwargs)
    install_scripted(llm, prompts, hf_greedy)
    outs = llm.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    assert output_tokens(outs) == hf_greedy
    assert sum(o.stats.num_draft_tokens for o in outs) > 0
    if case == "preempting":
        assert sum(o.stats.num_preemptions for o in outs) > 0


def test_prefix_hits_match_hf_and_the_state_oracle(dirs, prompts):
    """A shared system prompt, then multi-turn follow-ups: hits resume the Mamba-2 state from block snapshots."""
    root, model = dirs
    llm = hybrid_llm(root / "target", max_concurrency=8, **NGRAM)
    outs, worst, num_checked = run_waves(llm, prompts[:8])
    expected = hf_greedy_outputs(model, [list(o.prompt_token_ids) for o in outs], PREFIX_MAX_TOKENS)
    assert output_tokens(outs) == expected
    assert num_checked > 0 and worst < 1e-4, worst
    hit, queried = hit_tokens(llm)
    assert 0 < hit < queried, (hit, queried)
    assert {"prefix.hit", "hybrid.snapshot_take", "hybrid.snapshot_restore"} <= llm.engine.paths_taken()


def test_the_state_oracle_catches_a_rollback_mutant(dirs, prompts):
    """state-not-rolled-back (the slots keep the rejected drafts' state) under forced draft-LM acceptance: the clean
    engine's slots equal the recomputation, the mutant's do not."""
    root, _ = dirs

    def make(fault=None):
        return hybrid_llm(root / "target", fault=fault, method="draft", draft=str(root / "draft"), max_num_steps=3,
                          synthetic_acceptance=(0.8, 0.6, 0.5))

    _, clean_worst, _ = run_with_oracle(make(), prompts[:4], max_tokens=6)
    assert clean_worst < 1e-4
    _, worst, num_checked = run_with_oracle(make(injection("state-not-rolled-back")), prompts[:4], max_tokens=6)
    assert num_checked > 0 and worst > 1e-2, worst


def test_hf_reference_is_not_degenerate(hf_greedy):
    """The tiny target's greedy outputs vary (a constant stream would let a broken engine match)."""
    assert len({t for out in hf_greedy for t in out}) > 30
    assert torch.tensor(hf_greedy).shape == (len(PROMPT_LENGTHS), MAX_TOKENS)
