"""The step loop as one flow: `StepLoop.step(last) -> (finished, next)` keeps no step in flight itself; the value it
returns is the only record of a launched step, and driving it by hand gives what the engine's own loop gives."""

from __future__ import annotations

from specbench import LLM, SamplingParams
from specbench.engine.inflight import InflightDecode


def _engine(tiny_pair, engine_env, is_async: bool):
    device, dtype = engine_env
    return LLM(tiny_pair[0], dtype=dtype, device=device, block_size=4, max_concurrency=4, kv_cache_gb=0.05,
               async_scheduling=is_async).engine


def _add(engine, prompts):
    for i, prompt in enumerate(prompts):
        engine.add_request(prompt, SamplingParams(max_tokens=4 + 2 * i, ignore_eos=True))


def test_the_step_in_flight_is_a_value_handed_to_the_next_step(tiny_pair, engine_env, prompt_ids):
    sync = _engine(tiny_pair, engine_env, is_async=False)
    _add(sync, prompt_ids[:3])
    expected = {o.request_id: o.output_token_ids for o in sync.run_until_done()}

    engine = _engine(tiny_pair, engine_env, is_async=True)
    _add(engine, prompt_ids[:3])
    finished, kinds, last = [], [], None
    while last is not None or engine.scheduler.has_unfinished():
        outputs, last = engine.loop.step(last, is_async=True)
        finished += outputs
        kinds.append(type(last))
        assert engine._inflight is None  # the engine's own slot is untouched: the loop kept nothing
    assert {o.request_id: o.output_token_ids for o in finished} == expected
    assert kinds[0] is type(None) and InflightDecode in kinds  # the prefill is read back, decode steps overlap
    assert engine.scheduler.block_manager.num_free_blocks == engine.parts.num_kv_blocks


def test_without_look_ahead_no_step_is_left_in_flight(tiny_pair, engine_env, prompt_ids):
    engine = _engine(tiny_pair, engine_env, is_async=True)
    _add(engine, prompt_ids[:2])
    while engine.scheduler.has_unfinished():
        _, last = engine.loop.step(None, is_async=False)
        assert last is None
