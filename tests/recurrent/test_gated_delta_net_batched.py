"""The Gated DeltaNet layer's batched verify path (every request a verify row of the same length: plain decode, or
every request drafting k) against the per-request loop it replaces: the same outputs and kept states, to fp32
rounding (the two paths batch the same matmuls differently)."""

from __future__ import annotations

import pytest
import torch

from specbench.recurrent.config import GatedDeltaNetConfig
from specbench.recurrent.gated_delta_net import GatedDeltaNet
from specbench.recurrent.state_cache import StateCache
from specbench.recurrent.state_shape import StateShape
from specbench.recurrent.state_rows import state_rows

CONFIG = GatedDeltaNetConfig(num_k_heads=2, num_v_heads=4, k_dim=8, v_dim=6, conv_kernel_size=4)
HIDDEN = 16


def _layer() -> GatedDeltaNet:
    torch.manual_seed(0)
    layer = GatedDeltaNet(CONFIG, HIDDEN, 1e-6, state_layer=0)
    for param in layer.parameters():
        param.data.normal_(0, 0.3)
    return layer


def _states(num_slots: int) -> StateCache:
    c = CONFIG
    cache = StateCache(StateShape.of(c.state_layout(), 1),
                       num_slots, torch.float32, torch.device("cpu"))
    cache.conv.normal_()
    cache.recurrent.normal_(0, 0.1)
    return cache


@pytest.mark.parametrize("num_tokens", [1, 4])
def test_batched_verify_equals_the_per_request_loop(num_tokens, monkeypatch):
    import specbench.recurrent.gated_delta_net as module

    layer, slots = _layer(), [3, 0, 2]
    x = torch.randn(len(slots) * num_tokens, HIDDEN)
    batched = _states(4)
    looped = _states(4)
    looped.conv.copy_(batched.conv)
    looped.recurrent.copy_(batched.recurrent)
    cu = tuple(range(0, x.shape[0] + 1, num_tokens))
    rows = state_rows(slots, [num_tokens] * len(slots), len(slots), [False] * len(slots))
    with torch.no_grad():
        out = layer(x, cu, batched, rows)
        monkeypatch.setattr(module, "_is_uniform_verify", lambda rows, cu: False)  # the per-request loop
        looped_out = layer(x, cu, looped, rows)
    assert looped.pending and batched.pending
    torch.testing.assert_close(out, looped_out, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(batched.pending[0][0], looped.pending[0][0], atol=0, rtol=0)
    torch.testing.assert_close(batched.pending[0][1], looped.pending[0][1], atol=1e-6, rtol=1e-6)
