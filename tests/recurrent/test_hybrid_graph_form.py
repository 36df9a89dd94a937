"""The graph form of a hybrid target's recurrent layers (recurrent/graph_rows.py), run eagerly on CPU: the rows a CUDA
graph is captured on (a padded batch bucket, slots from the static buffer, static pending offsets) give the real
requests the outputs and kept states of the ordinary eager forward, and a padding request reads the scratch slot and
moves no slot: after the commit of the real requests, every other slot (the scratch one included) is as it was."""

from __future__ import annotations

import pytest
import torch

from specbench.recurrent.config import GatedDeltaNetConfig
from specbench.recurrent.gated_delta_net import GatedDeltaNet
from specbench.recurrent.graph_rows import GraphStateRows, replays_graph
from specbench.recurrent.mamba2_config import Mamba2Config
from specbench.recurrent.mamba2_mixer import Mamba2Mixer
from specbench.recurrent.state_cache import StateCache
from specbench.recurrent.state_rows import state_rows
from specbench.recurrent.state_shape import StateShape

HIDDEN = 16
NUM_SLOTS = 5
SLOTS = [3, 0, 2]  # the real requests' slots; slots 1 and 4 are nobody's, slot 5 is the scratch slot
BUCKET = 4  # the graph's batch: the 3 real requests and one padding request


def _layer(kind: str):
    torch.manual_seed(0)
    if kind == "gated_delta_net":
        config = GatedDeltaNetConfig(num_k_heads=2, num_v_heads=4, k_dim=8, v_dim=6, conv_kernel_size=4)
        layer = GatedDeltaNet(config, HIDDEN, 1e-6, state_layer=0)
    else:
        config = Mamba2Config(num_heads=4, head_dim=8, num_groups=2, state_size=6, conv_kernel_size=4,
                              intermediate_size=2 * HIDDEN)
        layer = Mamba2Mixer(config, HIDDEN, 1e-6, state_layer=0)
    for param in layer.parameters():
        param.data.normal_(0, 0.3)
    return layer, config


def _states(config, seed: int) -> StateCache:
    cache = StateCache(StateShape.of(config.state_layout(), 1), NUM_SLOTS, torch.float32, torch.device("cpu"))
    gen = torch.Generator().manual_seed(seed)
    cache.conv.copy_(torch.randn(cache.conv.shape, generator=gen))
    cache.recurrent.copy_(torch.randn(cache.recurrent.shape, generator=gen) * 0.1)
    return cache


def _commit(cache: StateCache, num_tokens: int, accepted: list[int]) -> None:
    """The engine's commit of the real requests (engine/state_attach.py): slot r takes kept row r * n + accepted."""
    rows = torch.tensor([r * num_tokens + a for r, a in enumerate(accepted)])
    cache.commit(torch.tensor(SLOTS), rows, rows)


@pytest.mark.parametrize("kind", ["gated_delta_net", "mamba2"])
@pytest.mark.parametrize("num_tokens", [1, 4])  # plain decode; every request drafting 3
@torch.no_grad()
def test_the_graph_form_is_the_eager_forward_and_padding_moves_no_slot(kind, num_tokens):
    layer, config = _layer(kind)
    eager, graphed = _states(config, seed=1), _states(config, seed=1)
    before = (graphed.conv.clone(), graphed.recurrent.clone())
    x = torch.randn(len(SLOTS) * num_tokens, HIDDEN, generator=torch.Generator().manual_seed(2))
    cu = tuple(range(0, x.shape[0] + 1, num_tokens))
    rows = state_rows(SLOTS, [num_tokens] * len(SLOTS), len(SLOTS), [False] * len(SLOTS))
    assert replays_graph(rows, cu)
    out = layer(x, cu, eager, rows)

    static = GraphStateRows(graphed, max_num_reqs=8, max_query_len=4)
    static.load(state_rows([1, 4, 0, 3, 2], [1] * 5, 5), 8)  # an earlier, larger step left its slots behind
    static.load(rows, BUCKET)
    assert static.slots[:BUCKET].tolist() == SLOTS + [graphed.scratch_slot]
    graph_rows = static.rows(BUCKET, num_tokens)
    padding = torch.randn(num_tokens, HIDDEN, generator=torch.Generator().manual_seed(3)) * 5
    with static.forward_on_static_kept():
        graphed_out = layer(torch.cat([x, padding]), (), graphed, graph_rows)  # no host offsets, as in a graph
    assert graphed.static_kept is None

    real = len(SLOTS) * num_tokens
    torch.testing.assert_close(graphed_out[:real], out, atol=1e-6, rtol=1e-6)
    kept = static.kept_outputs()
    assert kept[0].shape[0] == BUCKET * num_tokens  # the padding request's rows too: the commit never picks them
    assert kept[1].data_ptr() == static.kept[1].data_ptr()  # in the static buffers every graph shares
    # (to fp32 rounding: the projections ran over one more row)
    torch.testing.assert_close(kept[0][:real], eager.pending[0][0], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(kept[1][:real], eager.pending[0][1], atol=1e-6, rtol=1e-6)
    assert torch.equal(graphed.conv, before[0]) and torch.equal(graphed.recurrent, before[1])  # no slot moved

    static.restore_kept(tuple(t[:real] for t in kept))  # what a replay hands back: the real requests' rows
    accepted = [0, num_tokens - 1, num_tokens // 2]
    _commit(eager, num_tokens, accepted)
    _commit(graphed, num_tokens, accepted)
    torch.testing.assert_close(graphed.conv, eager.conv, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(graphed.recurrent, eager.recurrent, atol=1e-6, rtol=1e-6)
    untouched = [s for s in range(NUM_SLOTS + 1) if s not in SLOTS]
    assert graphed.scratch_slot in untouched
    assert torch.equal(graphed.conv[:, untouched], before[0][:, untouched])
    assert torch.equal(graphed.recurrent[:, untouched], before[1][:, untouched])


def test_only_uniform_chain_verifies_replay_graphs():
    assert replays_graph(state_rows([0, 1], [1, 1], 2), (0, 1, 2))  # plain decode
    assert replays_graph(state_rows([0, 1], [4, 4], 2), (0, 4, 8))  # every request drafting 3
    assert not replays_graph(state_rows([0, 1], [4, 1], 2), (0, 4, 5))  # a zero-draft request beside a drafting one
    assert not replays_graph(state_rows([0, 1], [1, 5], 1), (0, 1, 6))  # a verify beside a prompt chunk
    assert not replays_graph(state_rows([0], [6], 0, [True]), (0, 6))  # a prefill
    assert not replays_graph(None, (0, 1))


def test_graphs_use_the_kept_buffers_the_builder_reserved_before_the_kv_pool():
    """The builder reserves the graphs' kept-state buffers before it sizes the KV pool from free memory
    (graph_rows.new_graph_kept); the graphs then write into those, allocating nothing; a reservation too small for
    the graphs' rows is replaced."""
    from specbench.recurrent.graph_rows import new_graph_kept

    _, config = _layer("gated_delta_net")
    cache = _states(config, seed=3)
    reserved = new_graph_kept(cache, max_rows=8 * 4)
    assert reserved[0].shape[:2] == (1, 32) and reserved[1].dtype == torch.float32
    cache.graph_kept = reserved
    static = GraphStateRows(cache, max_num_reqs=8, max_query_len=4)
    assert static.kept is reserved
    small = _states(config, seed=4)
    small.graph_kept = new_graph_kept(small, max_rows=4)
    grown = GraphStateRows(small, max_num_reqs=8, max_query_len=4)
    assert grown.kept[0].shape[1] == 32 and small.graph_kept is grown.kept
