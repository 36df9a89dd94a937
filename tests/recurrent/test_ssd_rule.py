"""Mamba-2's SSD scan (recurrent/ssd_rule.py) and mixer (recurrent/mamba2_mixer.py): the per-token reference against
a naive element-by-element loop, the chunked form against the per-token one (chunk sizes, kept states at cuts), both
against transformers' own Mamba-2 scan (Bamba's torch fallback), and our mixer against transformers' BambaMixer over
a prefill followed by verify rows that keep every position's state."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from specbench.recurrent.mamba2_config import Mamba2Config
from specbench.recurrent.mamba2_mixer import Mamba2Mixer
from specbench.recurrent.ssd_rule import ssd_scan, ssd_scan_chunked
from specbench.recurrent.state_cache import StateCache
from specbench.recurrent.state_rows import state_rows
from specbench.recurrent.state_shape import StateShape

hf = pytest.importorskip("transformers.models.bamba.modeling_bamba")

T, H, P, G, N = 11, 4, 3, 2, 5


def _inputs(seed: int = 0, num_tokens: int = T):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(num_tokens, H, P, generator=gen)
    dt_raw = torch.randn(num_tokens, H, generator=gen)
    dt_bias = torch.randn(H, generator=gen) * 0.5
    a = -torch.rand(H, generator=gen) - 0.1
    b, c = torch.randn(num_tokens, G, N, generator=gen), torch.randn(num_tokens, G, N, generator=gen)
    d = torch.randn(H, generator=gen)
    state = torch.randn(H, P, N, generator=gen) * 0.3
    return x, dt_raw, dt_bias, a, b, c, d, state


def _dt(dt_raw, dt_bias):
    return F.softplus(dt_raw + dt_bias)


def _naive(x, dt, a, b, c, d, state):
    """Element by element, straight from the recurrence's definition."""
    state = state.clone()
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for h in range(H):
            g = h // (H // G)
            for p in range(P):
                for n in range(N):
                    state[h, p, n] = math.exp(dt[t, h] * a[h]) * state[h, p, n] + dt[t, h] * x[t, h, p] * b[t, g, n]
                out[t, h, p] = sum(state[h, p, n] * c[t, g, n] for n in range(N)) + d[h] * x[t, h, p]
    return out, state


def test_the_per_token_scan_is_the_naive_loop():
    x, dt_raw, dt_bias, a, b, c, d, state = _inputs()
    dt = _dt(dt_raw, dt_bias)
    ours = ssd_scan(x, dt, a, b, c, d, state, keep_states=True)
    out, final = _naive(x, dt, a, b, c, d, state)
    torch.testing.assert_close(ours.output, out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.final_state, final, atol=1e-5, rtol=1e-5)
    # the state after token t is the final state of the first t + 1 tokens
    for t in (0, 4, T - 1):
        head = ssd_scan(x[: t + 1], dt[: t + 1], a, b[: t + 1], c[: t + 1], d, state)
        torch.testing.assert_close(ours.states[t], head.final_state, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("chunk_size", [1, 3, 64])
def test_the_chunked_scan_is_the_per_token_scan(chunk_size):
    x, dt_raw, dt_bias, a, b, c, d, state = _inputs(seed=1)
    dt = _dt(dt_raw, dt_bias)
    ref = ssd_scan(x, dt, a, b, c, d, state, keep_states=True)
    cuts = (2, 5, T)
    ours = ssd_scan_chunked(x, dt, a, b, c, d, state, chunk_size=chunk_size, state_at=cuts)
    torch.testing.assert_close(ours.output, ref.output, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.final_state, ref.final_state, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.states, ref.states[[n - 1 for n in cuts]], atol=1e-5, rtol=1e-5)


def test_both_forms_match_transformers_scan():
    x, dt_raw, dt_bias, a, b, c, d, state = _inputs(seed=2)
    out, final = hf.mamba2_chunk_scan(x[None], dt_raw[None], a, b[None], c[None], chunk_size=4, D=d, dt_bias=dt_bias,
                                      initial_states=state[None], dt_softplus=True, return_final_states=True)
    dt = _dt(dt_raw, dt_bias)
    for ours in (ssd_scan(x, dt, a, b, c, d, state), ssd_scan_chunked(x, dt, a, b, c, d, state, chunk_size=4)):
        torch.testing.assert_close(ours.output, out[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(ours.final_state, final[0], atol=1e-5, rtol=1e-5)
    # transformers' one-token update (its decode step) from the same state
    step_state = state[None].clone()
    y = hf.mamba2_selective_state_update(
        step_state, x[:1], dt_raw[:1, :, None].expand(-1, -1, P), a[:, None, None].expand(-1, P, N), b[:1], c[:1],
        d[:, None].expand(-1, P), dt_bias=dt_bias[:, None].expand(-1, P), dt_softplus=True)
    one = ssd_scan(x[:1], dt[:1], a, b[:1], c[:1], d, state)
    torch.testing.assert_close(one.output[0], y[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(one.final_state, step_state[0], atol=1e-5, rtol=1e-5)


def _mixers(seed: int = 0):
    from transformers import BambaConfig

    from specbench.selftest.hf_reference import hf_bamba_mismatch

    mismatch = hf_bamba_mismatch(2)
    if mismatch is not None:  # the GPU image's transformers: its mixer is not the engine's
        pytest.skip(f"no HF reference: {mismatch}")
    hidden = 32
    config = BambaConfig(hidden_size=hidden, num_hidden_layers=1, num_attention_heads=2, mamba_n_heads=8,
                         mamba_d_head="auto", mamba_n_groups=2, mamba_d_state=6, mamba_d_conv=4, mamba_expand=2,
                         mamba_chunk_size=4, rms_norm_eps=1e-6)
    theirs = hf.BambaMixer(config, layer_idx=0).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in theirs.named_parameters():
            param.copy_(torch.randn(param.shape, generator=gen) * (0.5 if param.dim() > 1 else 0.3))
        theirs.A_log.copy_(torch.rand(8, generator=gen).add(0.2).log())
    ours_config = Mamba2Config(num_heads=8, head_dim=8, num_groups=2, state_size=6, conv_kernel_size=4,
                               intermediate_size=2 * hidden)
    ours = Mamba2Mixer(ours_config, hidden, 1e-6, state_layer=0)
    ours.load_state_dict(theirs.state_dict())
    return theirs, ours, ours_config, hidden


@torch.no_grad()
def test_the_mixer_matches_transformers_over_a_prefill_then_a_verify():
    """Committed rows (chunked scan into the slot), then 4 verify rows from the slot (per-token scan, every
    position's state kept): the outputs are transformers' over the whole sequence at once, and each kept state is
    the state a prefill of the tokens up to it leaves."""
    theirs, ours, config, hidden = _mixers()
    num_tokens, num_verify = 13, 4
    x = torch.randn(num_tokens, hidden, generator=torch.Generator().manual_seed(7))
    expected = theirs(x[None])[0]
    cache = StateCache(StateShape.of(config.state_layout(), 1), 1, torch.float32, torch.device("cpu"))
    first = num_tokens - num_verify
    head = ours(x[:first], (0, first), cache, state_rows([0], [first], 0, [True]))
    cache.begin_forward()
    tail = ours(x[first:], (0, num_verify), cache, state_rows([0], [num_verify], 1, [False]))
    torch.testing.assert_close(torch.cat([head, tail]), expected, atol=1e-5, rtol=1e-5)
    kept_conv, kept_ssm = cache.pending[0]
    for j in range(num_verify):
        fresh = StateCache(StateShape.of(config.state_layout(), 1), 1, torch.float32, torch.device("cpu"))
        n = first + j + 1
        ours(x[:n], (0, n), fresh, state_rows([0], [n], 0, [True]))
        torch.testing.assert_close(kept_conv[j], fresh.conv[0, 0], atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(kept_ssm[j], fresh.recurrent[0, 0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("num_tokens", [1, 4])
@torch.no_grad()
def test_the_batched_verify_equals_the_per_request_loop(num_tokens, monkeypatch):
    """Every request a verify row of the same length (plain decode; every request drafting k): one conv and one scan
    over the batch, the same outputs and kept states as the loop over requests."""
    import specbench.recurrent.mamba2_mixer as module

    _, layer, config, hidden = _mixers(seed=3)
    slots = [3, 0, 2]
    batched = StateCache(StateShape.of(config.state_layout(), 1), 4, torch.float32, torch.device("cpu"))
    batched.conv.normal_()
    batched.recurrent.normal_(0, 0.1)
    looped = StateCache(StateShape.of(config.state_layout(), 1), 4, torch.float32, torch.device("cpu"))
    looped.conv.copy_(batched.conv)
    looped.recurrent.copy_(batched.recurrent)
    x = torch.randn(len(slots) * num_tokens, hidden, generator=torch.Generator().manual_seed(4))
    cu = tuple(range(0, x.shape[0] + 1, num_tokens))
    rows = state_rows(slots, [num_tokens] * len(slots), len(slots), [False] * len(slots))
    out = layer(x, cu, batched, rows)
    monkeypatch.setattr(module, "is_uniform_verify", lambda rows, cu: False)  # the per-request loop
    looped_out = layer(x, cu, looped, rows)
    torch.testing.assert_close(out, looped_out, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(batched.pending[0][0], looped.pending[0][0], atol=0, rtol=0)
    torch.testing.assert_close(batched.pending[0][1], looped.pending[0][1], atol=1e-6, rtol=1e-6)
