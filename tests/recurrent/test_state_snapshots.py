"""State snapshots at block boundaries (recurrent/state_snapshots.py): the states a committed forward keeps at its
cuts are the token-by-token states there; the store's entries are provisional until published, bounded (least
recently used evicted first), dropped with their blocks; and on the engine a hit is shortened to the last block whose
snapshot is stored (a stride of several blocks, a store too small to keep them), with output unchanged."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from specbench import SamplingParams
from specbench.recurrent.causal_conv import causal_conv, conv_states_at
from specbench.recurrent.gated_delta_chunked import gated_delta_rule_chunked
from specbench.recurrent.gated_delta_rule import gated_delta_rule
from specbench.recurrent.state_cache import StateCache
from specbench.recurrent.state_shape import StateShape
from specbench.recurrent.state_snapshots import SnapshotPoint, StateSnapshots
from tests.support.hf_greedy import tiny_prompt_ids
from tests.support.hybrid_runs import hybrid_llm
from tests.support.tiny_hybrid import build_tiny_hybrid

T, HK, HV, DK, DV = 150, 2, 4, 8, 6


def test_chunked_states_at_cuts_are_the_token_by_token_states():
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(T, HK, DK, generator=gen), torch.randn(T, HK, DK, generator=gen)
    v = torch.randn(T, HV, DV, generator=gen)
    g, beta = -F.softplus(torch.randn(T, HV, generator=gen)), torch.rand(T, HV, generator=gen)
    state = torch.randn(HV, DK, DV, generator=gen) * 0.1
    reference = gated_delta_rule(q, k, v, g, beta, state, keep_states=True)
    cuts = (1, 16, 64, 80, 149, 150)  # off and on the 64-token chunks, the first token, the last
    ours = gated_delta_rule_chunked(q, k, v, g, beta, state, state_at=cuts)
    torch.testing.assert_close(ours.states, reference.states[[c - 1 for c in cuts]], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ours.output, reference.output, atol=1e-4, rtol=1e-4)
    assert gated_delta_rule_chunked(q, k, v, g, beta, state).states is None

    x, conv_state, weight = torch.randn(T, 5, generator=gen), torch.randn(5, 3, generator=gen), torch.randn(5, 4)
    _, _, kept = causal_conv(x, conv_state, weight, keep_states=True)
    torch.testing.assert_close(conv_states_at(x, conv_state, list(cuts)), kept[[c - 1 for c in cuts]])


def _store(capacity: int, stride: int = 1) -> StateSnapshots:
    return StateSnapshots(StateShape(1, 3, 2, (1, 2, 2)), capacity, 4, stride, torch.float32, torch.device("cpu"))


def test_points_entries_publishing_and_eviction():
    store = _store(3)
    # rows covering positions 2 .. 10: states after 4 and 8 tokens (rows 1 and 5)
    points = store.plan(["a"], [2], [9])
    assert [(p.request, p.row) for p in points] == [(0, 1), (0, 5)]
    assert points[1].entry != points[0].entry
    assert store.plan(["a"], [3], [1]) == (SnapshotPoint(0, 0, points[0].entry),)  # the same point: its entry
    assert store.publish("a", 4, b"h1") and not store.publish("a", 12, b"h3")  # nothing taken at 12
    assert store.has(b"h1") and not store.has(b"h2")
    store.forget_request("a")  # the provisional entry at 8 goes back
    store.plan(["b"], [0], [8])  # 2 entries free: b's points at 4 and 8
    assert store.plan(["c"], [0], [4])[0].entry == points[0].entry  # full: h1's (least recently used) is evicted
    assert not store.has(b"h1")
    assert store.plan(["d"], [0], [4]) == ()  # every entry provisional: nothing to claim, the point is skipped
    assert store.publish("b", 8, b"h2") and store.publish("c", 4, b"h2")  # a second snapshot of h2: dropped
    store.drop(b"h2")
    assert not store.has(b"h2") and store.num_cached == 0


def test_restore_copies_without_touching_the_snapshot():
    store = _store(1)
    entry = store.plan(["a"], [0], [4])[0].entry
    store.conv[:, entry], store.recurrent[:, entry] = 1.0, 2.0
    store.publish("a", 4, b"h")
    slots = StateCache(store_shape := StateShape(1, 3, 2, (1, 2, 2)), 2, torch.float32, torch.device("cpu"))
    assert slots.shape == store_shape
    slots.snapshots = store
    store.restore(b"h", slots.conv, slots.recurrent, slots.slot_for("b"))
    slots.recurrent.add_(1.0)
    assert bool((slots.recurrent[:, 0] == 3.0).all()) and bool((store.recurrent[:, entry] == 2.0).all())


@pytest.mark.parametrize("options, longest_hit", [
    ({"state_snapshot_blocks": 3}, 12),  # snapshots every 12 tokens only: a 20-token shared prefix hits 12
    # one snapshot, taken where the first prompt's last whole block ends (24, past the shared 20): no hit at all
    ({"state_snapshots": 1}, 0),
    ({}, 20),
])
def test_hits_are_shortened_to_the_last_block_with_a_snapshot(tmp_path, options, longest_hit):
    build_tiny_hybrid(tmp_path, seed=0)
    base = tiny_prompt_ids((33,))[0]
    shared = base[:20]
    prompts = [shared + [5, 6, 7, 8, 9], shared + [8, 9]]
    params = SamplingParams(max_tokens=1, ignore_eos=True)  # no decode step: the prefill's snapshots only
    reference = hybrid_llm(tmp_path, enable_prefix_caching=False).generate(prompts, params)
    llm = hybrid_llm(tmp_path, **options)
    outs = [llm.generate([p], params)[0] for p in prompts]  # one after the other: the second hits the first's
    assert [o.output_token_ids for o in outs] == [o.output_token_ids for o in reference]
    assert outs[1].stats.num_prefix_hit_tokens == longest_hit


def test_no_snapshots_no_prefix_caching(tmp_path):
    build_tiny_hybrid(tmp_path, seed=0)
    assert "--state-snapshots is 0" in hybrid_llm(tmp_path, state_snapshots=0).engine.parts.prefix_caching
