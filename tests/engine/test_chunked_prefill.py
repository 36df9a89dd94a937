"""Chunked prefill (--chunked-prefill): greedy output, acceptance and logprobs equal to whole-prompt prefill.

Prompts sit at the chunk size (the token budget, 16) -1 / +0 / +1 and at block multiples (block 4) -1 / +1, beside
short prompts that are already decoding when the long ones are admitted (max_concurrency 4 of 8 requests), so steps
really mix chunks with decode/verify rows: each test asserts the paths it meant to take. fp32: exact identity; on a
GPU run in bf16 only a match rate is asserted (test_lossless_greedy.check_identity).
"""

from __future__ import annotations

import pytest
from tests.engine.test_lossless_greedy import check_identity

from specbench import LLM, SamplingParams
from specbench.engine.prefill_chunk import PrefillChunk
from specbench.engine.request import Request
from specbench.engine.scheduler import Scheduler
from specbench.engine.stats import RequestStats
from specbench.engine.verify_launch import lookahead_blocker
from specbench.kv.block_manager import BlockManager

BUDGET = 16  # max_num_batched_tokens: the chunk size
LENGTHS = (5, 7, BUDGET - 1, BUDGET, BUDGET + 1, 11, 13, 2 * BUDGET + 1, 40)
MAX_TOKENS = 12
CHUNK_PATHS = {"prefill.chunked_mixed", "prefill.chunk_partial"}


@pytest.fixture(scope="module")
def prompts() -> list[list[int]]:
    import random

    rng = random.Random(0)
    return [[rng.randrange(5, 500) for _ in range(n)] for n in LENGTHS]


@pytest.fixture(scope="module")
def models(tiny_pair, tmp_path_factory) -> dict[str, tuple[str, str | None]]:
    """method -> (target, draft) on the shared tiny llama: a draft LM, an EAGLE-3 head, an MTP module."""
    from specbench.selftest.tiny_eagle import build_tiny_eagle_head
    from specbench.selftest.tiny_mtp import MTP_PREFIX, build_mtp_target

    target, draft = tiny_pair
    root = tmp_path_factory.mktemp("chunked")
    return {"none": (target, None), "ngram": (target, None), "draft": (target, draft),
            "eagle3": (target, build_tiny_eagle_head(target, root / "head")),
            "mtp": (build_mtp_target(target, root / "mtp", MTP_PREFIX), None)}


def run(target: str, prompts, engine_env, *, chunked: bool, method: str = "none", draft: str | None = None,
        num_steps: int = 0, params: SamplingParams | list[SamplingParams] | None = None, **options):
    device, dtype = engine_env
    pool = {} if "num_kv_blocks" in options else {"kv_cache_gb": 0.05}
    llm = LLM(target, dtype=dtype, device=device, block_size=4, max_concurrency=4, method=method, draft=draft,
              max_num_steps=num_steps, enable_chunked_prefill=chunked, max_num_batched_tokens=BUDGET,
              ngram_min=1, ngram_max=3, **pool, **options)
    outs = llm.generate(prompts, params or SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    return llm, outs


def tokens(outs) -> list[list[int]]:
    return [list(o.output_token_ids) for o in outs]


@pytest.mark.parametrize("method,num_steps", [("none", 0), ("ngram", 3), ("draft", 3), ("eagle3", 3), ("mtp", 2)])
def test_greedy_chunked_equals_whole_prompt_prefill(models, prompts, engine_env, method, num_steps):
    target, draft = models[method]
    _, whole = run(target, prompts, engine_env, chunked=False, method=method, draft=draft, num_steps=num_steps)
    llm, chunked = run(target, prompts, engine_env, chunked=True, method=method, draft=draft, num_steps=num_steps)
    check_identity(f"chunked_{method}", tokens(chunked), tokens(whole), engine_env)
    assert CHUNK_PATHS <= llm.engine.paths_taken()
    assert {"mixed", "prefill", "decode"} <= {s.phase for s in llm.engine.step_stats}
    assert max(s.num_scheduled_tokens for s in llm.engine.step_stats) <= BUDGET + 4 * (1 + num_steps)
    if engine_env[1] == "fp32" and num_steps:  # deterministic drafts see the same prompt: the same acceptance
        assert [o.stats.num_accepted_tokens for o in chunked] == [o.stats.num_accepted_tokens for o in whole]
        assert [o.stats.num_draft_tokens for o in chunked] == [o.stats.num_draft_tokens for o in whole]


@pytest.mark.parametrize("method,num_steps", [("none", 0), ("draft", 3)])
def test_seeded_sampling_chunked_equals_whole_prompt_prefill(models, prompts, engine_env, method, num_steps):
    """Each request draws from its own generator, whatever step its first token comes in: the same draws."""
    if engine_env[1] != "fp32":
        pytest.skip("sampled identity needs fp32 logits (bf16 kernels round per batch shape)")
    target, draft = models[method]
    params = [SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True, temperature=0.9, seed=i)
              for i in range(len(prompts))]
    _, whole = run(target, prompts, engine_env, chunked=False, method=method, draft=draft, num_steps=num_steps,
                   params=params)
    _, chunked = run(target, prompts, engine_env, chunked=True, method=method, draft=draft, num_steps=num_steps,
                     params=params)
    assert tokens(chunked) == tokens(whole)


@pytest.mark.parametrize("method", ["draft", "eagle3"])
def test_chunked_under_preemption(models, prompts, engine_env, method):
    """16 blocks of 4 tokens cannot hold 4 requests of up to 40 + 12 + k: partially prefilled and decoding requests
    are preempted and recomputed (a preempted one re-prefills its output too, in chunks)."""
    target, draft = models[method]
    _, whole = run(target, prompts, engine_env, chunked=False, method=method, draft=draft, num_steps=3)
    llm, chunked = run(target, prompts, engine_env, chunked=True, method=method, draft=draft, num_steps=3,
                       num_kv_blocks=16)
    check_identity(f"chunked_preempted_{method}", tokens(chunked), tokens(whole), engine_env)
    assert sum(o.stats.num_preemptions for o in chunked) > 0, "the pool was meant to force preemption"
    assert CHUNK_PATHS | {"preemption"} <= llm.engine.paths_taken()


def test_prompt_and_output_logprobs_across_chunks(models, prompts, engine_env):
    target, draft = models["draft"]
    params = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True, logprobs=2, prompt_logprobs=3)
    _, whole = run(target, prompts, engine_env, chunked=False, method="draft", draft=draft, num_steps=2,
                   params=params)
    _, chunked = run(target, prompts, engine_env, chunked=True, method="draft", draft=draft, num_steps=2,
                     params=params)
    tol = 1e-4 if engine_env[1] == "fp32" else 5e-2
    for a, b in zip(whole, chunked):
        assert len(a.prompt_logprobs) == len(b.prompt_logprobs) == len(a.prompt_token_ids)
        assert a.prompt_logprobs[0] is None and b.prompt_logprobs[0] is None
        for x, y in zip(a.prompt_logprobs[1:] + a.logprobs, b.prompt_logprobs[1:] + b.logprobs):
            assert x.token_id == y.token_id and abs(x.logprob - y.logprob) < tol
            if engine_env[1] == "fp32":
                assert x.rank == y.rank and [t for t, _ in x.top] == [t for t, _ in y.top]


def test_sliding_window_target(tmp_path_factory, prompts, engine_env):
    """Window 5 < every chunk: each chunk's queries see keys of the chunk before it through their own window."""
    from tests.support.window_models import build_window_target

    built = build_window_target(tmp_path_factory.mktemp("window"), "mistral-w5")
    _, whole = run(str(built.target), prompts, engine_env, chunked=False, method="draft", draft=str(built.draft),
                   num_steps=3)
    llm, chunked = run(str(built.target), prompts, engine_env, chunked=True, method="draft", draft=str(built.draft),
                       num_steps=3)
    check_identity("chunked_window", tokens(chunked), tokens(whole), engine_env)
    assert CHUNK_PATHS <= llm.engine.paths_taken()


def test_tree_rounds_alternate_with_chunk_steps(models, prompts, engine_env):
    """Tree rounds (eagle_topk > 1) are never mixed with chunks: they alternate with chunk-only steps."""
    from specbench.speculation.draft_shape import DraftShape

    target, head = models["eagle3"]
    outs = []
    for chunked in (False, True):
        device, dtype = engine_env
        llm = LLM(target, dtype=dtype, device=device, block_size=4, max_concurrency=4, method="eagle3", draft=head,
                  max_num_steps=3, enable_chunked_prefill=chunked, max_num_batched_tokens=BUDGET, kv_cache_gb=0.05)
        llm.engine.set_draft_shape(DraftShape(eagle_topk=2, num_draft_tokens=6))
        outs.append(tokens(llm.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))))
    check_identity("chunked_tree", outs[1], outs[0], engine_env)
    assert "mixed" not in {s.phase for s in llm.engine.step_stats}
    assert {"prefill.chunk_partial", "spec.tree_round"} <= llm.engine.paths_taken()


# ---- the scheduler's policy on its own ---------------------------------------------------------------------------
def _request(name: str, num_prompt: int) -> Request:
    from specbench.sampling_params import SamplingParams as Params

    stats = RequestStats(arrival_time=0.0, num_prompt_tokens=num_prompt)
    return Request(name, list(range(1, num_prompt + 1)), Params(max_tokens=8), stats)


def _scheduler(budget: int, num_steps: int = 2) -> Scheduler:
    return Scheduler(BlockManager(64, 4), max_concurrency=4, max_num_batched_tokens=budget, num_steps=num_steps,
                     max_model_len=256, enable_chunked_prefill=True)


def test_schedule_mixed_puts_verify_rows_first_and_splits_prompts_by_the_budget():
    scheduler = _scheduler(budget=10)
    running = _request("running", 5)
    scheduler.add(running)
    first = scheduler.schedule(0.0)
    assert first.requests == () and first.chunks == (PrefillChunk(running, 0, 5),)
    running.num_cached_tokens, running.output_token_ids = 5, [7]  # its final chunk ran and sampled a token
    long = _request("long", 12)
    scheduler.add(long)
    second = scheduler.schedule(0.0)
    # 1 + 2 drafts of the running request first, then 7 of the long prompt's 12 tokens: never its drafts
    assert second.requests == (running,) and second.num_draft_tokens == (2,)
    assert second.chunks == (PrefillChunk(long, 0, 7),) and not second.chunks[0].is_final
    running.num_cached_tokens, long.num_cached_tokens = 8, 7
    running.output_token_ids += [8, 9, 10]
    assert lookahead_blocker(second, scheduler.running, scheduler.waiting, 0.0, 4, 256, 2) == (
        "a prompt chunk is pending")
    third = scheduler.schedule(0.0)
    assert third.chunks == (PrefillChunk(long, 7, 5),) and third.chunks[0].is_final


def test_chunking_off_keeps_whole_prompt_prefill():
    scheduler = _scheduler(budget=10)
    scheduler.enable_chunked_prefill = False
    request = _request("long", 30)
    scheduler.add(request)
    batch = scheduler.schedule(0.0)
    assert batch.is_prefill and batch.requests == (request,) and batch.chunks == ()


def test_a_partially_prefilled_request_is_preempted_before_a_decoding_one():
    scheduler = Scheduler(BlockManager(4, 4), max_concurrency=4, max_num_batched_tokens=5, num_steps=2,
                          max_model_len=256, enable_chunked_prefill=True)
    decoding, prefilling = _request("decoding", 5), _request("prefilling", 4)
    scheduler.add(decoding)
    assert scheduler.schedule(0.0).chunks == (PrefillChunk(decoding, 0, 5),)
    decoding.num_cached_tokens, decoding.output_token_ids = 5, [7]
    scheduler.add(prefilling)
    batch = scheduler.schedule(0.0)  # 1 + 2 drafts, then 2 of the 4 prompt tokens
    assert batch.requests == (decoding,) and batch.chunks == (PrefillChunk(prefilling, 0, 2),)
    prefilling.num_cached_tokens = 2
    decoding.num_cached_tokens, decoding.output_token_ids = 12, [7] * 8  # its next round needs a 4th block
    batch = scheduler.schedule(0.0)
    assert batch.requests == (decoding,) and batch.preempted == (prefilling,) and batch.chunks == ()
    assert list(scheduler.waiting) == [prefilling] and prefilling.num_cached_tokens == 0
