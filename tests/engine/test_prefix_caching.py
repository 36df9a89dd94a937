"""Automatic prefix caching: greedy output with cache hits is the output without the cache (fp32: token identity),
for every method, at prompt lengths around block multiples, under preemption and eviction, with concurrent requests
sharing a system prompt; sampled output with a seed is the same hit or miss. Caching off is the reference."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tests.engine.test_lossless_greedy import check_identity

from specbench import LLM, SamplingParams
from specbench.check.prefix_scenario import longest_request, run_waves, scenario_overrides
from specbench.selftest.setups import plain_setup, selftest_setups

METHODS = ("none", "ngram", "draft", "eagle", "eagle3", "mtp")
K = 3


@pytest.fixture(scope="module")
def setups(tmp_path_factory, engine_env):
    """method -> CheckSetup on the selftest's tiny models (seed 0): every method's drafter and prompts."""
    device, dtype = engine_env
    built = selftest_setups(str(tmp_path_factory.mktemp("prefix")), 0, METHODS[1:], K, device=device,
                            engine_options={"dtype": dtype, "kv_cache_gb": 0.05})
    return {"none": plain_setup(built["draft"]), **built}


def engine(setup, **overrides) -> LLM:
    return LLM(replace(setup.engine, **overrides))


def hits(llm: LLM) -> tuple[int, int]:
    steps = llm.engine.step_stats
    return sum(s.num_prefix_hit_tokens for s in steps), sum(s.num_prefix_queried_tokens for s in steps)


def tokens(outs) -> list[list[int]]:
    return [list(o.output_token_ids) for o in outs]


@pytest.mark.parametrize("method", METHODS)
def test_shared_prefixes_multi_turn_and_eviction_match_no_cache(setups, engine_env, method):
    setup = setups[method]
    prompts = [list(p) for p in setup.prompts]
    bs = setup.engine.block_size
    params = SamplingParams(max_tokens=setup.max_tokens, ignore_eos=True)
    overrides = scenario_overrides(bs, longest_request(prompts, bs, setup.max_tokens, setup.engine.max_num_steps))
    cached = engine(setup, **overrides)
    got = run_waves(cached.generate, prompts, bs, params)
    fresh = engine(setup, enable_prefix_caching=False, **overrides)
    expected = fresh.generate([list(o.prompt_token_ids) for o in got], params)
    check_identity(f"prefix_{method}", tokens(got), tokens(expected), engine_env)
    num_hit, num_queried = hits(cached)
    assert num_hit > 0 and num_queried > num_hit
    assert cached.engine.scheduler.block_manager.prefix_cache.num_evictions > 0, "the small pool was meant to evict"
    assert {"prefix.hit", "prefix.register", "prefix.evict"} <= cached.engine.paths_taken()
    assert hits(fresh) == (0, 0) and fresh.engine.parts.prefix_caching == "off (option)"


@pytest.mark.parametrize("method", ["none", "draft", "eagle"])
@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_repeated_prompt_at_block_multiples_keeps_its_last_block_private(setups, engine_env, method, extra):
    """The same prompt twice: the second starts on the first's blocks, but never on the block holding its last token
    (its logits are needed)."""
    setup = setups[method]
    bs = setup.engine.block_size
    prompt = (list(setup.prompts[0]) * 8)[: 3 * bs + extra]
    params = SamplingParams(max_tokens=8, ignore_eos=True)
    llm = engine(setup)
    first = llm.generate([prompt], params)
    before = len(llm.engine.step_stats)
    second = llm.generate([prompt], params)
    # every full prompt block was registered (EAGLE's keyed by the token after it too: there is one), but the last
    # token's block stays private
    expected_hit = (len(prompt) - 1) // bs * bs
    prefill = next(s for s in llm.engine.step_stats[before:] if s.phase == "prefill")
    assert (prefill.num_prefix_hit_tokens, prefill.num_prefix_queried_tokens) == (expected_hit, len(prompt))
    assert prefill.num_scheduled_tokens == len(prompt) - expected_hit  # only the rest is prefilled
    check_identity(f"repeat_{method}_{extra}", tokens(second), tokens(first), engine_env)


@pytest.mark.parametrize("method", ["none", "draft", "mtp"])
def test_preempted_requests_recompute_on_their_own_cached_blocks(setups, engine_env, method):
    setup = setups[method]
    prompts = [list(p) for p in setup.prompts]
    params = SamplingParams(max_tokens=24, ignore_eos=True)
    bs = setup.engine.block_size
    longest = max(len(p) for p in prompts) + 24 + K + 2
    pool = {"num_kv_blocks": -(-longest // bs) + 3, "max_concurrency": 4}
    cached = engine(setup, **pool)
    got = cached.generate(prompts, params)
    expected = engine(setup, enable_prefix_caching=False, **pool).generate(prompts, params)
    check_identity(f"preempt_{method}", tokens(got), tokens(expected), engine_env)
    assert sum(o.stats.num_preemptions for o in got) > 0, "the pool was meant to preempt"
    assert hits(cached)[0] > 0


def test_concurrent_requests_share_a_system_prompt(setups, engine_env):
    setup = setups["draft"]
    bs = setup.engine.block_size
    system = (list(setup.prompts[0])[::-1] * 4)[: 3 * bs]
    prompts = [system + list(p) for p in setup.prompts]
    params = SamplingParams(max_tokens=12, ignore_eos=True)
    llm = engine(setup)
    got = llm.generate(prompts[:1], params) + llm.generate(prompts[1:], params)  # the rest arrive together
    expected = engine(setup, enable_prefix_caching=False).generate(prompts, params)
    check_identity("system_prompt", tokens(got), tokens(expected), engine_env)
    assert hits(llm)[0] >= 3 * bs * (len(prompts) - 1)  # every later request hit the whole system prompt
    # per request (the requests table's num_cached_prompt_tokens; serve's usage.prompt_tokens_details)
    assert got[0].stats.num_cached_prompt_tokens == 0
    assert all(3 * bs <= o.stats.num_cached_prompt_tokens < len(p) for o, p in zip(got[1:], prompts[1:]))
    assert all(o.stats.num_cached_prompt_tokens is None for o in expected)  # no prefix cache: nothing to say


@pytest.mark.parametrize("method", ["none", "draft"])
def test_sampled_output_with_a_seed_is_the_same_hit_or_miss(setups, method):
    setup = setups[method]
    prompt = (list(setup.prompts[1]) * 6)[: 5 * setup.engine.block_size]
    params = SamplingParams(max_tokens=12, temperature=0.9, top_p=0.95, seed=7, ignore_eos=True)
    llm = engine(setup)
    miss = llm.generate([prompt], params)
    hit = llm.generate([prompt], params)
    fresh = engine(setup, enable_prefix_caching=False).generate([prompt], params)
    assert hits(llm)[0] > 0
    assert tokens(hit) == tokens(miss) == tokens(fresh)


def test_prompt_logprobs_requests_look_nothing_up(setups):
    setup = setups["none"]
    prompt = (list(setup.prompts[0]) * 4)[: 3 * setup.engine.block_size]
    llm = engine(setup)
    llm.generate([prompt], SamplingParams(max_tokens=4, ignore_eos=True))
    before = len(llm.engine.step_stats)
    with_logprobs = llm.generate([prompt], SamplingParams(max_tokens=4, ignore_eos=True, prompt_logprobs=1))
    prefill = next(s for s in llm.engine.step_stats[before:] if s.phase == "prefill")
    assert (prefill.num_prefix_hit_tokens, prefill.num_prefix_queried_tokens) == (0, len(prompt))
    fresh = engine(setup, enable_prefix_caching=False).generate(
        [prompt], SamplingParams(max_tokens=4, ignore_eos=True, prompt_logprobs=1))
    assert with_logprobs[0].prompt_logprobs == fresh[0].prompt_logprobs


@pytest.mark.parametrize("method", ["draft", "eagle"])
def test_tree_rounds_on_cached_prefixes_match_no_cache(setups, engine_env, method):
    from specbench.selftest.setups import TREE_SHAPE

    setup = setups[method]
    prompts = [list(p) for p in setup.prompts]
    bs = setup.engine.block_size
    params = SamplingParams(max_tokens=setup.max_tokens, ignore_eos=True)
    overrides = scenario_overrides(bs, longest_request(prompts, bs, setup.max_tokens, 8))
    cached = engine(setup, **overrides)
    cached.engine.set_draft_shape(TREE_SHAPE)
    got = run_waves(cached.generate, prompts, bs, params)
    expected = engine(setup, enable_prefix_caching=False, **overrides).generate(
        [list(o.prompt_token_ids) for o in got], params)
    check_identity(f"tree_prefix_{method}", tokens(got), tokens(expected), engine_env)
    assert hits(cached)[0] > 0


@pytest.mark.parametrize("method", ["none", "draft", "eagle3", "mtp"])
def test_prefix_hits_under_chunked_prefill_match_no_cache_unchunked(setups, engine_env, method):
    """Both scheduler features at once: waves of prompts sharing prefixes, admitted as chunks of a small budget
    beside running requests' rounds, each chunked prefill starting at its hit; the reference caches nothing and
    prefills whole prompts."""
    setup = setups[method]
    prompts = [list(p) for p in setup.prompts]
    bs = setup.engine.block_size
    params = SamplingParams(max_tokens=setup.max_tokens, ignore_eos=True)
    overrides = scenario_overrides(bs, longest_request(prompts, bs, setup.max_tokens, setup.engine.max_num_steps))
    both = engine(setup, enable_chunked_prefill=True, max_num_batched_tokens=2 * bs + 3, **overrides)
    got = run_waves(both.generate, prompts, bs, params)
    fresh = engine(setup, enable_prefix_caching=False, **overrides)
    expected = fresh.generate([list(o.prompt_token_ids) for o in got], params)
    check_identity(f"prefix_chunked_{method}", tokens(got), tokens(expected), engine_env)
    num_hit, num_queried = hits(both)
    assert num_hit > 0 and num_queried > num_hit
    assert {"prefix.hit", "prefill.chunked_mixed", "prefill.chunk_partial"} <= both.engine.paths_taken()
