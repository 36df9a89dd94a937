"""Partial RoPE (GLM-4.5: the first `rotary_dim` dims of each q/k head rotate, the rest pass through) on the
engine's full-width rotate-half RoPE, so every attention path and kernel runs it unchanged.

Rotate-half over a head of width d pairs dim j with j + d/2. Partial RoPE pairs dim i with i + r/2 (i < r/2) and
leaves dims [r, d) alone. Attention scores are q . k, which a permutation of the head dims applied to both q and k
leaves unchanged, so the loader permutes each q and k head's rows (and biases, and q/k norm weights, whose RMS
statistic is permutation-invariant) into the order
    [rotated first halves (r/2) | pass-through (d/2 - r/2) | rotated second halves (r/2) | pass-through (rest)]
and the rotary table gives the pass-through pairs frequency zero (cos 1, sin 0: the identity; layers.py). V and
o_proj are untouched, so the residual stream, every hidden state and the logits are exactly HF's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

_Q_OR_K = ("self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight", "self_attn.k_proj.bias")
_NORMS = ("self_attn.q_norm.weight", "self_attn.k_norm.weight")


def head_dim_order(head_dim: int, rotary_dim: int) -> torch.Tensor:  # [head_dim] int64: new dim j <- old order[j]
    half, rot_half = head_dim // 2, rotary_dim // 2
    num_pass_half = half - rot_half
    return torch.cat([
        torch.arange(0, rot_half),
        torch.arange(rotary_dim, rotary_dim + num_pass_half),
        torch.arange(rot_half, rotary_dim),
        torch.arange(rotary_dim + num_pass_half, head_dim),
    ])


def permuted_for_rope(
    weights: Iterable[tuple[str, torch.Tensor]], head_dim: int, rotary_dim: int | None
) -> Iterator[tuple[str, torch.Tensor]]:
    """The checkpoint's tensors with each q/k head's dims in `head_dim_order`; unchanged when rotary_dim is None."""
    order = None if rotary_dim is None else head_dim_order(head_dim, rotary_dim)
    for name, tensor in weights:
        if order is not None and name.endswith(_Q_OR_K):
            heads = tensor.reshape(-1, head_dim, *tensor.shape[1:])  # [num_heads, head_dim, (hidden)]
            tensor = heads[:, order].reshape(tensor.shape)
        elif order is not None and name.endswith(_NORMS):
            tensor = tensor[order]
        yield name, tensor
