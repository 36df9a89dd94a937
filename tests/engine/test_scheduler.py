"""Scheduler: admission under the concurrency cap, KV reservation for k + 1 tokens, LIFO preemption."""

from specbench.engine.request import Request, RequestStatus
from specbench.engine.scheduler import Scheduler
from specbench.engine.stats import RequestStats
from specbench.kv.block_manager import BlockManager
from specbench.sampling_params import SamplingParams


def _req(i: int, n: int, max_tokens: int = 16, arrival: float = 0.0) -> Request:
    return Request(f"r{i}", list(range(1, n + 1)), SamplingParams(max_tokens=max_tokens),
                   RequestStats(arrival_time=arrival, num_prompt_tokens=n))


def _sched(num_blocks=100, block_size=4, max_concurrency=2, num_steps=3, max_model_len=1000):
    return Scheduler(BlockManager(num_blocks, block_size), max_concurrency=max_concurrency,
                     max_num_batched_tokens=1000, num_steps=num_steps, max_model_len=max_model_len)


def _prefilled(s: Scheduler, batch):
    for r in batch.requests:
        r.num_cached_tokens = r.num_tokens
        r.output_token_ids.append(7)


def test_admits_up_to_concurrency_then_decodes_with_reservation():
    s = _sched()
    for i in range(3):
        s.add(_req(i, 5))
    batch = s.schedule(now=1.0)
    assert batch.is_prefill and [r.request_id for r in batch.requests] == ["r0", "r1"]
    _prefilled(s, batch)
    batch = s.schedule(now=1.0)
    assert not batch.is_prefill and batch.num_draft_tokens == (3, 3)
    for r in batch.requests:
        # newest token at position 5 plus 3 drafts -> 9 slots -> 3 blocks of 4
        assert len(r.block_table) == 3
    assert len(s.waiting) == 1


def test_future_arrivals_wait():
    s = _sched()
    s.add(_req(0, 5, arrival=10.0))
    assert s.schedule(now=1.0) is None
    assert s.schedule(now=10.0).is_prefill


def test_drafts_uniform_near_max_tokens_but_capped_by_context():
    s = _sched(num_steps=5)
    s.add(_req(0, 4, max_tokens=3))
    _prefilled(s, s.schedule(now=0.0))
    # 1 output so far, max 3: still k drafts (the commit truncates), so rounds stay uniform for CUDA graphs
    assert s.schedule(now=0.0).num_draft_tokens == (5,)
    s = _sched(num_steps=5, max_model_len=8)
    s.add(_req(1, 4))
    _prefilled(s, s.schedule(now=0.0))
    # 5 tokens of an 8-token context: newest + drafts + bonus must fit -> 2 drafts
    assert s.schedule(now=0.0).num_draft_tokens == (2,)


def test_preempts_most_recent_when_pool_runs_out():
    s = _sched(num_blocks=6, block_size=4, max_concurrency=3, num_steps=1)
    for i in range(3):
        s.add(_req(i, 7))
    batch = s.schedule(now=0.0)
    # 7 prompt tokens take 2 blocks; the first round (7 + 1 + 1 slots) takes 3: two fit in 6 blocks.
    assert [r.request_id for r in batch.requests] == ["r0", "r1"]
    _prefilled(s, batch)
    for r in batch.requests:
        r.output_token_ids.extend([7] * 5)
        r.num_cached_tokens = r.num_tokens - 1  # 12 cached, round needs 14 slots = 4 blocks each
    batch = s.schedule(now=0.0)
    assert [r.request_id for r in batch.requests] == ["r0"]
    assert [r.request_id for r in batch.preempted] == ["r1"]
    r1 = batch.preempted[0]
    assert r1.status is RequestStatus.WAITING and r1.block_table == [] and r1.num_cached_tokens == 0
    assert r1.stats.num_preemptions == 1
    assert list(s.waiting)[:2] == [r1, s.waiting[1]] and s.waiting[1].request_id == "r2"
