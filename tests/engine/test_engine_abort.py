"""LLMEngine.abort_request drops a running or waiting request between steps: its KV blocks and draft state are
freed, it is never reported, and the other requests' greedy outputs are unchanged."""

from __future__ import annotations

from specbench import LLM, SamplingParams

PARAMS = SamplingParams(max_tokens=12, ignore_eos=True)


def _engine(target, draft):
    return LLM(target, method="draft", draft=draft, max_num_steps=2, dtype="fp32", device="cpu", block_size=4,
               max_concurrency=2, kv_cache_gb=0.05).engine


def test_aborted_requests_free_their_kv_and_leave_the_others_unchanged(tiny_pair, prompt_ids):
    target, draft = tiny_pair
    engine = _engine(target, draft)
    num_free = engine.scheduler.block_manager.num_free_blocks
    ids = [engine.add_request(p, PARAMS) for p in prompt_ids[:3]]  # concurrency 2: the third waits
    for _ in range(3):
        assert not engine.step()
    running = engine.scheduler.running[0].request_id
    assert engine.scheduler.waiting[0].request_id == ids[2]
    assert engine.abort_request(running) and engine.abort_request(ids[2])
    assert not engine.abort_request(running) and not engine.abort_request("never-added")
    outputs = engine.run_until_done()
    assert [o.request_id for o in outputs] == [i for i in ids if i not in (running, ids[2])]
    assert engine.scheduler.block_manager.num_free_blocks == num_free and not engine.has_unfinished()
    assert not engine.proposer._state  # the draft model's per-request state went with them

    alone = _engine(target, draft)
    survivor = next(i for i, rid in enumerate(ids) if rid == outputs[0].request_id)
    alone.add_request(prompt_ids[survivor], PARAMS)
    assert alone.run_until_done()[0].output_token_ids == outputs[0].output_token_ids
