"""Releasing KV blocks wholly outside every layer's window (kv/block_manager.py release_leading, the scheduler's
kv_windows): on an all-window target a long generation holds about its windows' blocks, with greedy output identical
to the engine that keeps every block (and with forced preemption); any full-attention layer, or a proposer with its
own KV in the same tables, keeps every block."""

from __future__ import annotations

import pytest

from specbench import LLM, SamplingParams
from specbench.attention.kinds import FullAttention, SlidingWindowAttention
from specbench.engine.builder import releasable_windows
from specbench.kv.block_manager import RELEASED_BLOCK, BlockManager
from specbench.selftest.tiny import random_prompts
from specbench.selftest.tiny_window_moe import WINDOW, build_window_moe_pair

BLOCK_SIZE = 4
MAX_TOKENS = 120
SMALL_POOL = 40  # blocks: 160 tokens, one request's whole context (<= 150) but not four


def test_released_entries_stay_in_place_and_are_not_freed_again():
    bm = BlockManager(8, BLOCK_SIZE)
    table: list[int] = []
    assert bm.grow(table, 5 * BLOCK_SIZE) and bm.num_free_blocks == 3
    first = list(table)
    assert bm.release_leading(table, 0, 2) == 2
    assert table[:2] == [RELEASED_BLOCK] * 2 and table[2:] == first[2:] and bm.num_free_blocks == 5
    assert bm.release_leading(table, 2, 1) == 2  # nothing left behind the released prefix
    bm.free(table, 2)
    assert table == [] and bm.num_free_blocks == 8 and bm.peak_num_owned == 5
    with pytest.raises(RuntimeError, match="freed twice"):
        bm.free([first[0]])


def test_only_an_all_window_target_without_draft_kv_releases():
    w = SlidingWindowAttention(4)
    assert releasable_windows((w, SlidingWindowAttention(6)), has_draft_kv=False) == (4, 6)
    assert releasable_windows((w, FullAttention()), has_draft_kv=False) == ()
    assert releasable_windows((), has_draft_kv=False) == ()
    assert releasable_windows((w, w), has_draft_kv=True) == ()


@pytest.fixture(scope="module")
def window_moe(tmp_path_factory):
    return build_window_moe_pair(tmp_path_factory.mktemp("window-moe"), seed=0)


def _run(target: str, method: str, *, release: bool, num_kv_blocks: int) -> tuple[list[tuple[int, ...]], int, int]:
    """(greedy tokens, peak blocks held, preemptions) of 4 long requests."""
    llm = LLM(target, method=method, max_num_steps=3 if method != "none" else 0, dtype="fp32", device="cpu",
              block_size=BLOCK_SIZE, num_kv_blocks=num_kv_blocks, max_concurrency=4, debug_invariants=True)
    scheduler = llm.engine.scheduler
    assert scheduler.kv_windows == ((WINDOW,) * 2)  # the builder's choice: every layer windowed, no draft KV
    if not release:
        scheduler.kv_windows = ()
    outs = llm.generate([list(p) for p in random_prompts(4, seed=0)],
                        SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    return ([tuple(o.output_token_ids) for o in outs], scheduler.block_manager.peak_num_owned,
            sum(o.stats.num_preemptions for o in outs))


@pytest.mark.parametrize("method", ["none", "ngram"])
def test_a_long_generation_holds_its_windows_blocks_with_identical_output(window_moe, method):
    target, _ = window_moe
    kept, kept_peak, _ = _run(target, method, release=False, num_kv_blocks=512)
    released, released_peak, _ = _run(target, method, release=True, num_kv_blocks=512)
    print(f"\n{method}: 4 requests x ({MAX_TOKENS} tokens + prompt), window {WINDOW}, block {BLOCK_SIZE}: peak blocks "
          f"held {kept_peak} keeping every block, {released_peak} releasing those outside the windows")
    assert released == kept
    # Releasing, a request never holds more than its prefill did plus a round's keys (its prompt outgrows the
    # window; MAX_TOKENS outgrow the prompt several times): the peak is the prefill's, a quarter of keeping them all.
    prompt_blocks = sum(-(-(len(p) + 4) // BLOCK_SIZE) + 1 for p in random_prompts(4, seed=0))
    assert released_peak <= prompt_blocks and 4 * released_peak < kept_peak, (released_peak, prompt_blocks)
    # A pool that fits one whole context but not four: keeping every block preempts, releasing never does; the same
    # tokens either way.
    tokens, _, num_preemptions = _run(target, method, release=False, num_kv_blocks=SMALL_POOL)
    assert tokens == kept and num_preemptions > 0
    assert _run(target, method, release=True, num_kv_blocks=SMALL_POOL)[::2] == (kept, 0)


def test_the_scheduler_releases_before_each_step_and_preemption_frees_the_rest():
    from specbench.engine.request import Request
    from specbench.engine.scheduler import Scheduler
    from specbench.engine.stats import RequestStats
    from specbench.sampling_params import SamplingParams

    bm = BlockManager(64, BLOCK_SIZE)
    s = Scheduler(bm, max_concurrency=2, max_num_batched_tokens=1000, num_steps=3, max_model_len=1000,
                  kv_windows=(5, 6))
    request = Request("r0", list(range(4, 34)), SamplingParams(max_tokens=64), RequestStats(arrival_time=0.0, num_prompt_tokens=30))
    s.add(request)
    s.schedule(now=0.0)  # prefill: nothing cached yet, nothing released
    assert request.num_released_blocks == 0 and len(request.block_table) == 8
    request.num_cached_tokens = 30  # the prefill ran; the next queries sit at positions >= 29 (window 6: key 24 on)
    batch = s.schedule(now=0.0)
    assert not batch.is_prefill and request.num_released_blocks == 6 == request.block_table.count(RELEASED_BLOCK)
    assert bm.num_free_blocks == 64 - (len(request.block_table) - 6)
    s.preempt_all()
    assert request.block_table == [] and request.num_released_blocks == 0 and bm.num_free_blocks == 64
