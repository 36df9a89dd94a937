"""State slots of a hybrid target (recurrent/state_cache.py): one per running request, handed out on its first
forward, back when it finishes, is aborted or preempted; running out is one clear error."""

from __future__ import annotations

import pytest
import torch

from specbench import SamplingParams
from specbench.errors import SpecbenchError
from specbench.recurrent.state_cache import StateCache
from specbench.recurrent.state_shape import StateShape
from tests.support.hf_greedy import tiny_prompt_ids
from tests.support.hybrid_runs import hybrid_llm
from tests.support.tiny_hybrid import build_tiny_hybrid


def test_slots_are_handed_out_once_and_reused_after_free():
    cache = StateCache(StateShape(1, 4, 3, (2, 2, 2)), 2, torch.float32, torch.device("cpu"))
    a, b = cache.slot_for("a"), cache.slot_for("b")
    assert a != b and cache.slot_for("a") == a and cache.num_used == 2
    with pytest.raises(SpecbenchError, match="all 2 recurrent-state slots are taken"):
        cache.slot_for("c")
    cache.free("a")
    cache.free("a")  # freeing twice (finished, then aborted) is harmless
    assert cache.slot_for("c") == a and cache.num_used == 2


def test_the_engine_gives_slots_back_on_finish_abort_and_preemption(tmp_path):
    build_tiny_hybrid(tmp_path, seed=0)
    prompts = tiny_prompt_ids((6, 33, 13, 21))
    llm = hybrid_llm(tmp_path, max_concurrency=4, num_kv_blocks=14, method="ngram", ngram_min=1, ngram_max=3,
                     max_num_steps=3)
    engine, states = llm.engine, llm.engine.runner.kv_cache.states
    ids = [engine.add_request(p, SamplingParams(max_tokens=10, ignore_eos=True)) for p in prompts]
    engine.step()
    engine.step()
    assert states.num_used > 0
    assert engine.abort_request(ids[0])
    outs = engine.run_until_done()
    assert states.num_used == 0
    assert sum(o.stats.num_preemptions for o in outs) > 0  # 14 blocks of 4 cannot hold them all: preempted


def test_a_commit_after_a_graph_replay_takes_every_layer_at_once_and_the_same_rows():
    """The commit's one-index form (every layer's kept states are the graphs' static buffers) gives each slot the
    rows the per-layer loop gives, and leaves the other slots alone."""
    from specbench.recurrent.graph_rows import new_graph_kept
    from specbench.recurrent.state_cache import StateCache
    from specbench.recurrent.state_shape import StateShape

    shape = StateShape(num_layers=3, conv_channels=5, conv_width=2, recurrent_dims=(2, 3, 4))
    gen = torch.Generator().manual_seed(0)
    results = []
    for is_static in (True, False):
        states = StateCache(shape, num_slots=6, dtype=torch.float32, device=torch.device("cpu"))
        states.conv.normal_(generator=gen)
        states.recurrent.normal_(generator=gen)
        states.graph_kept = new_graph_kept(states, max_rows=8)
        torch.manual_seed(1)
        for t in states.graph_kept:
            t.copy_(torch.randn(t.shape))
        for layer in range(shape.num_layers):
            conv, recurrent = (t[layer, :8] for t in states.graph_kept)
            states.keep(layer, conv if is_static else conv.clone(), recurrent if is_static else recurrent.clone())
        assert states._pending_is_graph_kept() == is_static
        before = states.conv.clone(), states.recurrent.clone()
        slots, rows = torch.tensor([4, 1]), torch.tensor([3, 6])
        states.commit(slots, rows, rows)
        for layer in range(shape.num_layers):
            for slot, row in zip(slots.tolist(), rows.tolist()):
                assert torch.equal(states.conv[layer, slot], states.graph_kept[0][layer, row])
                assert torch.equal(states.recurrent[layer, slot], states.graph_kept[1][layer, row])
        others = [s for s in range(7) if s not in (4, 1)]
        assert torch.equal(states.conv[:, others], before[0][:, others])
        assert torch.equal(states.recurrent[:, others], before[1][:, others])
        assert not states.pending
