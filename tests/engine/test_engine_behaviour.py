"""Engine behaviour beyond greedy identity: self-speculation, seeded sampling, stop handling, refusals."""

from __future__ import annotations

import pytest
import torch

from specbench import LLM, SamplingParams
from specbench.errors import SpecbenchError


def _device() -> str:
    import os

    return os.environ.get("SPECBENCH_TEST_DEVICE", "cpu")


def _llm(target, **kwargs):
    kwargs.setdefault("block_size", 4)
    kwargs.setdefault("max_concurrency", 4)
    if "num_kv_blocks" not in kwargs:
        kwargs.setdefault("kv_cache_gb", 0.25)  # on a GPU the default budget would take most of the card
    return LLM(target, dtype="fp32", device=_device(), **kwargs)


def test_draft_equal_to_target_accepts_everything(tiny_pair, prompt_ids):
    target, _ = tiny_pair
    llm = _llm(target, method="draft", draft=target, max_num_steps=3)
    outs = llm.generate(prompt_ids[:4], SamplingParams(max_tokens=16, ignore_eos=True))
    drafted = sum(o.stats.num_draft_tokens for o in outs)
    accepted = sum(o.stats.num_accepted_tokens for o in outs)
    assert drafted > 0 and accepted / drafted >= 0.98


def test_seeded_sampling_is_reproducible_and_seed_dependent(tiny_pair, prompt_ids):
    target, draft = tiny_pair
    llm = _llm(target, method="draft", draft=draft, max_num_steps=2)

    def run(seed):
        params = [SamplingParams(temperature=1.0, top_p=0.9, max_tokens=12, ignore_eos=True, seed=seed + i)
                  for i in range(4)]
        return [o.output_token_ids for o in llm.generate(prompt_ids[:4], params)]

    a, b, c = run(0), run(0), run(100)
    assert a == b
    assert a != c


def test_set_num_steps_reuses_the_loaded_models(tiny_pair, prompt_ids):
    target, draft = tiny_pair
    llm = _llm(target, method="draft", draft=draft, max_num_steps=3)
    params = SamplingParams(max_tokens=10, ignore_eos=True)
    spec = [o.output_token_ids for o in llm.generate(prompt_ids[:3], params)]
    llm.engine.set_num_steps(0)
    outs = llm.generate(prompt_ids[:3], params)
    assert [o.output_token_ids for o in outs] == spec
    assert all(o.stats.num_draft_rounds == 0 for o in outs)


def test_stop_strings_and_max_tokens(tiny_pair):
    target, _ = tiny_pair
    llm = _llm(target, method="ngram", max_num_steps=3)
    free = llm.generate(["Question: how many apples?"], SamplingParams(max_tokens=30, ignore_eos=True))[0]
    assert free.finish_reason == "length" and len(free.output_token_ids) == 30
    # Stop at a string that occurs in the free-running text: text is cut before it, tokens stop there.
    words = free.text.split()
    stop = words[len(words) // 2]
    cut = llm.generate(["Question: how many apples?"],
                       SamplingParams(max_tokens=30, ignore_eos=True, stop=(stop,)))[0]
    assert cut.finish_reason == "stop"
    assert stop not in cut.text and free.text.startswith(cut.text)
    assert len(cut.output_token_ids) < 30


def test_draft_with_larger_vocab_is_refused(tiny_pair, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target, _ = tiny_pair
    model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)
    model.resize_token_embeddings(model.config.vocab_size + 64)
    model.save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(target).save_pretrained(tmp_path)
    with pytest.raises(SpecbenchError, match=r"draft vocabulary \(1088 ids\) does not match the target.s \(1024 ids\)"):
        _llm(target, method="draft", draft=str(tmp_path), max_num_steps=2)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(method="warp", max_num_steps=2), "unknown speculative method 'warp'; supported: "),
        (dict(method="none", max_num_steps=2), "num_steps 0"),
        (dict(method="draft", max_num_steps=2), "needs --draft"),
        (dict(num_kv_blocks=2), "KV pool"),
    ],
)
def test_impossible_configs_fail_clearly(tiny_pair, prompt_ids, kwargs, match):
    target, _ = tiny_pair
    with pytest.raises(SpecbenchError, match=match):
        llm = _llm(target, **kwargs)
        llm.generate(prompt_ids[:1], SamplingParams(max_tokens=8))


def test_synthetic_acceptance_forces_the_per_position_rates(tiny_pair, prompt_ids):
    target, draft = tiny_pair
    rates = (0.73, 0.52, 0.35)
    llm = _llm(target, method="draft", draft=draft, max_num_steps=3, synthetic_acceptance=rates, max_concurrency=8)
    outs = llm.generate(prompt_ids * 4, SamplingParams(max_tokens=40, ignore_eos=True))
    rounds = sum(o.stats.num_draft_rounds for o in outs)
    accepted_pos = [sum(o.stats.num_accepted_per_pos[i] for o in outs) for i in range(3)]
    drafted_pos0 = sum(o.stats.num_drafted_per_pos[0] for o in outs)
    assert rounds > 300
    for got, want in zip(accepted_pos, rates):
        # rounds near the max_tokens cap draft fewer positions; compare against rounds drafting position 0
        assert abs(got / drafted_pos0 - want) < 0.08, (got / drafted_pos0, want)


def test_synthetic_acceptance_validation():
    from specbench.config import EngineConfig

    with pytest.raises(SpecbenchError, match="non-increasing"):
        EngineConfig(target="x", method="draft", max_num_steps=2, synthetic_acceptance=(0.3, 0.5))
    with pytest.raises(SpecbenchError, match="2 rates for max_num_steps 3"):
        EngineConfig(target="x", method="draft", max_num_steps=3, synthetic_acceptance=(0.5, 0.3))
