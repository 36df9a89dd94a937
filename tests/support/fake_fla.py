"""A stand-in for fla-core's two gated-delta-rule entry points (`fla.ops.gated_delta_rule`), in plain torch loops, so
the CPU tests drive the "fla" recurrent-kernel dispatch (recurrent/fla_kernels.py, the layer's packing, varlen
offsets, per-position chaining and write-back) where the real kernels cannot run (fla needs CUDA).

It follows fla's documented contract, not our code: [B, T, H, K] inputs with q/k heads equal to the value heads
(the caller normalised and repeated them), `g` the log decay, `scale` on q, `initial_state` [N, HV, K, V] fp32, and
for `cu_seqlens` a batch of one whose sequences are cut at the offsets. It checks what fla itself refuses (a batch
other than one with cu_seqlens, a state count that is not the sequence count) and counts its calls.
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections import Counter

import torch

CALLS: Counter = Counter()


def _one_sequence(q, k, v, g, beta, scale, state):
    """q, k [T, H, K]; v [T, H, V]; g, beta [T, H]; state [H, K, V] fp32 -> (o [T, H, V] fp32, state)."""
    state = state.float().clone()
    out = torch.empty(v.shape, dtype=torch.float32, device=v.device)
    for t in range(q.shape[0]):
        state = state * torch.exp(g[t].float())[:, None, None]
        recalled = torch.einsum("hkv,hk->hv", state, k[t].float())
        state = state + torch.einsum("hk,hv->hkv", k[t].float(), beta[t].float()[:, None] * (v[t].float() - recalled))
        out[t] = torch.einsum("hkv,hk->hv", state, q[t].float() * scale)
    return out, state


def _check_heads(q, k, v):
    assert q.shape == k.shape and q.dim() == 4, (q.shape, k.shape)
    assert q.shape[2] == v.shape[2], "the caller repeats q/k to the value heads"


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           cu_seqlens=None, cu_seqlens_cpu=None, **kwargs):
    assert not kwargs, kwargs
    CALLS["chunk"] += 1
    return _run(q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, cu_seqlens_cpu)


def fused_recurrent_gated_delta_rule(q, k, v, g=None, beta=None, scale=None, initial_state=None,
                                     output_final_state=False, **kwargs):
    assert not kwargs, kwargs
    CALLS["recurrent"] += 1
    return _run(q, k, v, g, beta, scale, initial_state, output_final_state, None, None)


def _run(q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, cu_seqlens_cpu):
    _check_heads(q, k, v)
    scale = k.shape[-1] ** -0.5 if scale is None else scale
    if cu_seqlens is not None:
        if q.shape[0] != 1:
            raise ValueError("cu_seqlens needs a batch of one")
        assert cu_seqlens.dtype == torch.int64 and cu_seqlens.device == q.device
        if cu_seqlens_cpu is not None:
            assert cu_seqlens_cpu.device.type == "cpu" and cu_seqlens_cpu.tolist() == cu_seqlens.tolist()
        bounds = cu_seqlens.tolist()
        seqs = [(0, bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]
    else:
        seqs = [(b, 0, q.shape[1]) for b in range(q.shape[0])]
    if initial_state is not None and initial_state.shape[0] != len(seqs):
        raise ValueError("one initial state per sequence")
    out = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    finals = []
    for i, (b, start, end) in enumerate(seqs):
        state = (initial_state[i] if initial_state is not None
                 else torch.zeros(v.shape[2], k.shape[3], v.shape[3], device=v.device))
        o, state = _one_sequence(q[b, start:end], k[b, start:end], v[b, start:end], g[b, start:end],
                                 beta[b, start:end], scale, state)
        out[b, start:end] = o.to(v.dtype)
        finals.append(state)
    return out, (torch.stack(finals) if output_final_state else None)


@contextlib.contextmanager
def installed():
    """`fla.ops.gated_delta_rule` importable as this module's functions for the duration; the kernel-choice import
    probe is reset before and after."""
    from specbench.recurrent.kernel_choice import fla_import_error

    names = ("fla", "fla.ops", "fla.ops.gated_delta_rule")
    saved = {n: sys.modules.get(n) for n in names}
    ops = types.ModuleType("fla.ops.gated_delta_rule")
    ops.chunk_gated_delta_rule = chunk_gated_delta_rule
    ops.fused_recurrent_gated_delta_rule = fused_recurrent_gated_delta_rule
    sys.modules.update({"fla": types.ModuleType("fla"), "fla.ops": types.ModuleType("fla.ops"),
                        "fla.ops.gated_delta_rule": ops})
    fla_import_error.cache_clear()
    CALLS.clear()
    try:
        yield CALLS
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        fla_import_error.cache_clear()
