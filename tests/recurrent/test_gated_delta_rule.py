"""The gated delta rule and the short causal conv (recurrent/): the torch reference against transformers' own
Qwen3-Next functions (recurrent and chunked forms), and the per-position states a verify keeps against the states of
running the same tokens one at a time."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from specbench.recurrent.causal_conv import causal_conv
from specbench.recurrent.gated_delta_rule import gated_delta_rule

hf = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")

T, HK, HV, DK, DV = 7, 2, 4, 8, 6


def _inputs(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(T, HK, DK, generator=gen), torch.randn(T, HK, DK, generator=gen)
    v = torch.randn(T, HV, DV, generator=gen)
    g = -F.softplus(torch.randn(T, HV, generator=gen))  # log decay <= 0
    beta = torch.rand(T, HV, generator=gen)
    state = torch.randn(HV, DK, DV, generator=gen) * 0.1
    return q, k, v, g, beta, state


@pytest.mark.parametrize("form", ["recurrent", "chunk"])
def test_matches_transformers(form):
    q, k, v, g, beta, state = _inputs()
    ours = gated_delta_rule(q, k, v, g, beta, state)
    fn = hf.torch_recurrent_gated_delta_rule if form == "recurrent" else hf.torch_chunk_gated_delta_rule
    # k heads repeated to the v heads as Qwen3-Next's layer does (repeat_interleave): transformers before 5.2x
    # (the GPU image's 5.17) takes equal head counts only, later ones repeat inside
    q, k = (x.repeat_interleave(HV // HK, dim=1) for x in (q, k))
    out, final = fn(q[None], k[None], v[None], g=g[None], beta=beta[None], initial_state=state[None],
                    output_final_state=True, use_qk_l2norm_in_kernel=True)
    torch.testing.assert_close(ours.output, out[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.final_state, final[0], atol=1e-5, rtol=1e-5)


def test_kept_states_are_the_token_by_token_states():
    q, k, v, g, beta, state = _inputs(1)
    whole = gated_delta_rule(q, k, v, g, beta, state, keep_states=True)
    for t in range(T):
        prefix = gated_delta_rule(q[: t + 1], k[: t + 1], v[: t + 1], g[: t + 1], beta[: t + 1], state)
        torch.testing.assert_close(whole.states[t], prefix.final_state, atol=0, rtol=0)


def test_conv_matches_transformers_and_keeps_each_position():
    gen = torch.Generator().manual_seed(2)
    channels, kernel = 5, 4
    x = torch.randn(T, channels, generator=gen)
    weight = torch.randn(channels, kernel, generator=gen)
    out, final, kept = causal_conv(x, torch.zeros(channels, kernel - 1), weight, keep_states=True)
    ref = hf.causal_conv1d_fn.__wrapped__(x.t()[None], weight, None, activation="silu") if hasattr(
        hf.causal_conv1d_fn, "__wrapped__") else F.silu(F.conv1d(x.t()[None], weight[:, None], padding=kernel - 1,
                                                                 groups=channels)[..., :T])
    torch.testing.assert_close(out, ref[0].t(), atol=1e-6, rtol=1e-6)
    # splitting the tokens anywhere and carrying the state gives the same outputs and the kept states
    first, state, _ = causal_conv(x[:3], torch.zeros(channels, kernel - 1), weight)
    second, final2, _ = causal_conv(x[3:], state, weight)
    torch.testing.assert_close(torch.cat([first, second]), out, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(final2, final)
    torch.testing.assert_close(kept[2], state)
    torch.testing.assert_close(kept[-1], final)


@pytest.mark.parametrize("chunk_size", [1, 3, 64])
def test_the_chunked_form_matches_the_reference(chunk_size):
    from specbench.recurrent.gated_delta_chunked import gated_delta_rule_chunked

    q, k, v, g, beta, state = _inputs(3)
    reference = gated_delta_rule(q, k, v, g, beta, state)
    chunked = gated_delta_rule_chunked(q, k, v, g, beta, state, chunk_size=chunk_size)
    torch.testing.assert_close(chunked.output, reference.output, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(chunked.final_state, reference.final_state, atol=1e-5, rtol=1e-5)
