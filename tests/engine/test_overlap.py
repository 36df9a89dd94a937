"""Overlapped plain decoding (async scheduling) against the one-step-at-a-time loop: the same tokens, finish
reasons and KV accounting, under EOS / length finishes mid-lookahead, admissions, preemption and aborts."""

from __future__ import annotations

import time

import pytest

from specbench import LLM, SamplingParams
from specbench.engine.stop import StopChecker


@pytest.fixture
def make_engine(engine_env, tiny_pair):
    """Engines on the suite's device: on the GPU suite (scripts/gpu_check.sh) the pinned copy and its event
    are what gets tested."""
    device, dtype = engine_env

    def make(*, is_async: bool, **kwargs):
        options = dict(dtype=dtype, device=device, block_size=4, max_concurrency=4, kv_cache_gb=0.05)
        options.update(kwargs)
        return LLM(tiny_pair[0], async_scheduling=is_async, **options).engine

    return make


def _run(engine, prompts, params):
    for prompt, p in zip(prompts, params):
        engine.add_request(prompt, p)
    outputs = engine.run_until_done()
    return [(o.request_id, o.output_token_ids, o.finish_reason) for o in sorted(outputs, key=lambda o: o.request_id)]


def _params(num: int, **kwargs):
    # Different lengths: requests finish on different steps, so lookaheads hold rows of finished requests.
    return [SamplingParams(max_tokens=5 + 3 * i, **kwargs) for i in range(num)]


@pytest.mark.parametrize("sampling", [dict(ignore_eos=True), dict(ignore_eos=True, temperature=0.8, top_p=0.9,
                                                                    seed=7)])
def test_same_tokens_as_the_synchronous_loop(make_engine, tiny_pair, prompt_ids, sampling):
    params = _params(len(prompt_ids), **sampling)
    sync = _run(make_engine(is_async=False), prompt_ids, params)
    overlapped_engine = make_engine(is_async=True)
    overlapped = _run(overlapped_engine, prompt_ids, params)
    assert overlapped == sync
    assert all(len(tokens) == p.max_tokens for (_, tokens, _), p in zip(overlapped, params))
    assert overlapped_engine.scheduler.block_manager.num_free_blocks == overlapped_engine.parts.num_kv_blocks


def _eos_engine(engine, eos: int):
    engine.stop_checker = StopChecker(engine.tokenizer, frozenset({eos}), engine.stop_checker.max_model_len)
    return engine


def test_an_eos_finish_discards_the_row_already_launched(make_engine, tiny_pair, prompt_ids):
    # The token request 0 emits 4th becomes EOS: it finishes while its next step is already on the device.
    free = _run(make_engine(is_async=False), prompt_ids[:3], _params(3, ignore_eos=True))
    eos = free[0][1][3]
    params = _params(3)
    sync = _run(_eos_engine(make_engine(is_async=False), eos), prompt_ids[:3], params)
    engine = _eos_engine(make_engine(is_async=True), eos)
    overlapped = _run(engine, prompt_ids[:3], params)
    assert overlapped == sync
    assert overlapped[0][2] == "stop" and overlapped[0][1][-1] == eos
    assert engine.scheduler.block_manager.num_free_blocks == engine.parts.num_kv_blocks
    # the discarded row was computed: a step after the finish still counted three requests
    assert any(s.num_reqs == 3 for s in engine.step_stats if s.phase == "decode")


def test_a_steady_batch_runs_one_step_ahead(make_engine, tiny_pair, prompt_ids):
    engine = make_engine(is_async=True)
    for prompt in prompt_ids[:2]:
        engine.add_request(prompt, SamplingParams(max_tokens=8, ignore_eos=True))
    engine.step()  # prefill: read back at once (its token starts every request's output)
    lengths = []
    for _ in range(4):
        engine.step()
        lengths.append([r.num_output_tokens for r in engine.scheduler.running])
    # the first decode call only launches; every later call launches one step and reads back the one before
    assert lengths == [[1, 1], [2, 2], [3, 3], [4, 4]]
    assert all(r.num_cached_tokens == r.num_tokens for r in engine.scheduler.running)  # one token in flight


def test_preemption_and_admission_drain_the_lookahead(make_engine, tiny_pair, prompt_ids):
    params = [SamplingParams(max_tokens=20, ignore_eos=True)] * len(prompt_ids)
    small = dict(num_kv_blocks=17, max_concurrency=3)
    sync_engine = make_engine(is_async=False, **small)
    sync = _run(sync_engine, prompt_ids, params)
    engine = make_engine(is_async=True, **small)
    assert _run(engine, prompt_ids, params) == sync
    assert sum(s.num_preempted for s in engine.step_stats) > 0


def test_abort_while_a_step_is_in_flight(make_engine, tiny_pair, prompt_ids):
    engine = make_engine(is_async=True)
    params = SamplingParams(max_tokens=10, ignore_eos=True)
    ids = [engine.add_request(p, params) for p in prompt_ids[:2]]
    for _ in range(3):
        engine.step()
    assert engine.abort_request(ids[0])
    outputs = engine.run_until_done()
    assert [o.request_id for o in outputs] == [ids[1]]
    alone = make_engine(is_async=False)
    alone.add_request(prompt_ids[1], params)
    assert alone.run_until_done()[0].output_token_ids == outputs[0].output_token_ids
    assert engine.scheduler.block_manager.num_free_blocks == engine.parts.num_kv_blocks


def test_emissions_are_timed_when_read_and_steps_add_up_to_the_wall_time(make_engine, tiny_pair, prompt_ids):
    engine = make_engine(is_async=True, max_concurrency=2)
    start = time.perf_counter()
    outputs = {o.request_id: o for o in _run_outputs(engine, prompt_ids[:2], 12)}
    wall_ms = (time.perf_counter() - start) * 1e3
    for output in outputs.values():
        stats = output.stats
        assert stats.tokens_per_emission == [1] * 12
        assert stats.emission_times == sorted(stats.emission_times)
        assert stats.first_scheduled_time <= stats.emission_times[0]
    assert sum(s.step_ms for s in engine.step_stats) <= wall_ms


def _run_outputs(engine, prompts, max_tokens):
    for prompt in prompts:
        engine.add_request(prompt, SamplingParams(max_tokens=max_tokens, ignore_eos=True))
    return engine.run_until_done()


def test_a_speculating_engine_does_not_overlap_its_rounds(make_engine, tiny_pair, prompt_ids):
    engine = make_engine(is_async=True, method="draft", draft=tiny_pair[1], max_num_steps=2)
    engine.add_request(prompt_ids[0], SamplingParams(max_tokens=6, ignore_eos=True))
    while engine.has_unfinished():
        engine.step()
        assert engine._inflight is None
