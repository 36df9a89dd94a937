"""The fused Gated DeltaNet verify kernels (kernels/gated_delta_verify.py) against the torch forms, one request at a
time (recurrent/causal_conv.py's conv, recurrent/gated_delta_rule.py's per-token rule: no code shared with the
kernels): outputs, every position's conv and recurrent state, and the slots left untouched. Shapes with grouped
q/k heads, non-power-of-two head dims and channel counts, slots out of order with others between them."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

pytestmark = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)

from specbench.kernels.gated_delta_verify import DeltaVerifyDims, gated_delta_verify  # noqa: E402
from specbench.recurrent.causal_conv import causal_conv  # noqa: E402
from specbench.recurrent.gated_delta_rule import gated_delta_rule  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DIMS = DeltaVerifyDims(num_k_heads=2, k_dim=12, num_v_heads=4, v_dim=20)  # group 2; 2*24 + 80 = 128 channels
WIDTH = 3  # conv kernel 4


def _case(num_reqs: int, n: int, dtype: torch.dtype, seed: int):
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    d = DIMS
    num_slots = num_reqs + 3
    rows = num_reqs * n

    def rand(*shape, scale=1.0, dt=dtype):
        return (scale * torch.randn(*shape, generator=gen, device=DEVICE)).to(dt)

    mixed = rand(rows, d.conv_channels)
    conv_slots = rand(num_slots, d.conv_channels, WIDTH)
    rec_slots = rand(num_slots, d.num_v_heads, d.k_dim, d.v_dim, scale=0.5, dt=torch.float32)
    slots = torch.randperm(num_slots, generator=gen, device=DEVICE)[:num_reqs]
    weight = rand(d.conv_channels, WIDTH + 1, scale=0.5)
    log_decay = -torch.rand(rows, d.num_v_heads, generator=gen, device=DEVICE)  # g <= 0
    beta = torch.rand(rows, d.num_v_heads, generator=gen, device=DEVICE).to(dtype)
    return mixed, conv_slots, rec_slots, slots, weight, log_decay, beta


def _reference(mixed, conv_slots, rec_slots, slots, weight, log_decay, beta, n):
    """Request by request through the torch forms: (out [rows, Hv, Dv], kept conv, kept recurrent)."""
    d = DIMS
    outs, kept_conv, kept_rec = [], [], []
    for r, slot in enumerate(slots.tolist()):
        rows = slice(r * n, (r + 1) * n)
        conv_out, _, conv_kept = causal_conv(mixed[rows], conv_slots[slot], weight, keep_states=True)
        q, k, v = conv_out.split([d.key_size, d.key_size, d.num_v_heads * d.v_dim], dim=-1)
        rule = gated_delta_rule(q.reshape(n, d.num_k_heads, d.k_dim), k.reshape(n, d.num_k_heads, d.k_dim),
                                v.reshape(n, d.num_v_heads, d.v_dim), log_decay[rows], beta[rows], rec_slots[slot],
                                keep_states=True)
        outs.append(rule.output.to(mixed.dtype))
        kept_conv.append(conv_kept.to(conv_slots.dtype))
        kept_rec.append(rule.states)
    return torch.cat(outs), torch.cat(kept_conv), torch.cat(kept_rec)


@pytest.mark.parametrize("num_reqs, n", [(1, 1), (3, 1), (2, 4), (3, 3)])
def test_fused_verify_matches_the_torch_forms(num_reqs, n):
    case = _case(num_reqs, n, torch.float32, seed=10 * num_reqs + n)
    mixed, conv_slots, rec_slots, slots, weight, log_decay, beta = case
    before = (conv_slots.clone(), rec_slots.clone())
    rows = num_reqs * n
    out = torch.full((rows, DIMS.num_v_heads, DIMS.v_dim), float("nan"), device=DEVICE)
    kept_conv = torch.full((rows, DIMS.conv_channels, WIDTH), float("nan"), device=DEVICE)
    kept_rec = torch.full((rows, DIMS.num_v_heads, DIMS.k_dim, DIMS.v_dim), float("nan"), device=DEVICE)
    gated_delta_verify(mixed, conv_slots, rec_slots, slots, weight, log_decay, beta, DIMS, out, kept_conv, kept_rec)
    want_out, want_conv, want_rec = _reference(*case, n)
    assert torch.equal(kept_conv, want_conv)  # copies of inputs: exact
    torch.testing.assert_close(out, want_out, rtol=2e-5, atol=2e-5)
    torch.testing.assert_close(kept_rec, want_rec, rtol=2e-5, atol=2e-5)
    assert torch.equal(conv_slots, before[0]) and torch.equal(rec_slots, before[1])  # verify rows keep, not write


def test_a_kept_state_one_position_late_differs():
    """The kernel's kept states are each position's own: the state after token t, not before it (the
    state-fused-kept-shifted mutant's bug shows against the reference at every position)."""
    num_reqs, n = 2, 3
    case = _case(num_reqs, n, torch.float32, seed=7)
    mixed, conv_slots, rec_slots, slots, weight, log_decay, beta = case
    rows = num_reqs * n
    out = torch.empty(rows, DIMS.num_v_heads, DIMS.v_dim, device=DEVICE)
    kept_conv = torch.empty(rows, DIMS.conv_channels, WIDTH, device=DEVICE)
    kept_rec = torch.empty(rows, DIMS.num_v_heads, DIMS.k_dim, DIMS.v_dim, device=DEVICE)
    gated_delta_verify(mixed, conv_slots, rec_slots, slots, weight, log_decay, beta, DIMS, out, kept_conv, kept_rec)
    _, _, want_rec = _reference(*case, n)
    late = want_rec.view(num_reqs, n, -1)[:, :-1]
    assert (kept_rec.view(num_reqs, n, -1)[:, 1:] - late).abs().amax() > 1e-2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="bf16 rounding as the torch forms: checked on CUDA")
def test_fused_verify_bf16_on_cuda():
    num_reqs, n = 4, 4
    case = _case(num_reqs, n, torch.bfloat16, seed=3)
    mixed, conv_slots, rec_slots, slots, weight, log_decay, beta = case
    rows = num_reqs * n
    out = torch.empty(rows, DIMS.num_v_heads, DIMS.v_dim, dtype=torch.bfloat16, device=DEVICE)
    kept_conv = torch.empty(rows, DIMS.conv_channels, WIDTH, dtype=torch.bfloat16, device=DEVICE)
    kept_rec = torch.empty(rows, DIMS.num_v_heads, DIMS.k_dim, DIMS.v_dim, device=DEVICE)
    gated_delta_verify(mixed, conv_slots, rec_slots, slots, weight, log_decay, beta, DIMS, out, kept_conv, kept_rec)
    want_out, want_conv, want_rec = _reference(*case, n)
    assert torch.equal(kept_conv, want_conv)
    torch.testing.assert_close(out.float(), want_out.float(), rtol=2e-2, atol=2e-2)  # one bf16 rounding apart
    torch.testing.assert_close(kept_rec, want_rec, rtol=1e-3, atol=1e-3)
