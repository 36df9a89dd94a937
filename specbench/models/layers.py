"""Building blocks of a Llama-family decoder: RMSNorm, rotary embedding, gated MLP.

Norms, RoPE and the MLP activation run the fused Triton kernels where `fused_kernels.use_fused` says so for the
layer's own policy (`fused_policy`, set per model: fused_kernels.set_policy); the torch code is the reference.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from specbench.models import fused_kernels
from specbench.models.config_rope import RopeScaling


def uninitialized_embedding(num_embeddings: int, embedding_dim: int) -> nn.Embedding:
    """nn.Embedding with its weight left as torch.empty made it, for a model built under torch.device("meta") and
    filled by its loader. nn.Embedding's own init (normal_) has no meta kernel: the reference implementation it falls
    back to imports torch._dynamo, ~2 s the first time in a process (each CLI run, each test worker), for values that
    to_empty drops anyway."""
    return nn.Embedding(num_embeddings, embedding_dim, _weight=torch.empty(num_embeddings, embedding_dim))


class RMSNorm(fused_kernels.UsesFusedKernels, nn.Module):
    is_offset = False  # the (1 + weight) form (OffsetRMSNorm); the fused kernel takes either

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size))  # [size]

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., size]
        if self.is_fused(x):
            return fused_kernels.rms_norm(x, self.weight, self.eps, is_offset=self.is_offset)[0]
        return self.reference(x)

    def add_and_norm(
        self,
        x: torch.Tensor,  # [num_tokens, size]
        residual: torch.Tensor | None,  # [num_tokens, size]; None: x is the stream itself (nothing to add)
    ) -> tuple[torch.Tensor, torch.Tensor]:  # (norm(residual + x), residual + x), both [num_tokens, size]
        """The pre-norm block's residual add and the next norm: one kernel on the fused path."""
        if residual is None:
            return self(x), x
        if self.is_fused(x):
            return fused_kernels.rms_norm(x, self.weight, self.eps, residual, is_offset=self.is_offset)
        summed = residual + x
        return self.reference(summed), summed

    def is_fused(self, x: torch.Tensor) -> bool:
        # The kernel writes x's dtype; torch would promote a mixed-dtype product.
        return x.dtype == self.weight.dtype and fused_kernels.use_fused(self.fused_policy, x)

    def reference(self, x: torch.Tensor) -> torch.Tensor:  # [..., size]
        # Statistics in fp32 (bf16 sums of squares lose too much); the weight multiplies in the
        # input dtype, as the reference models do, so bf16 results match them bit for bit.
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * normed.to(x.dtype)


def rope_inv_freq(head_dim: int, theta: float, scaling: RopeScaling | None) -> torch.Tensor:  # [head_dim // 2]
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device="cpu").float() / head_dim))
    if scaling is None:
        return inv_freq
    if scaling.rope_type == "linear":
        return inv_freq / scaling.factor
    if scaling.rope_type == "yarn":
        return _yarn_inv_freq(head_dim, theta, scaling)
    # llama3: long wavelengths are slowed by `factor`, short ones kept, the band between interpolated.
    old_len = scaling.original_max_position_embeddings
    low_freq_wavelen = old_len / scaling.low_freq_factor
    high_freq_wavelen = old_len / scaling.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / scaling.factor, inv_freq)
    smooth = (old_len / wavelen - scaling.low_freq_factor) / (scaling.high_freq_factor - scaling.low_freq_factor)
    smoothed = (1 - smooth) * scaled / scaling.factor + smooth * scaled
    is_medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


def _yarn_inv_freq(head_dim: int, theta: float, s: RopeScaling) -> torch.Tensor:
    """YaRN: dims that rotate fewer than beta_slow times over the original context are interpolated (/ factor),
    those rotating more than beta_fast times kept, a linear ramp between (transformers' formula)."""

    def correction_dim(num_rotations: float) -> float:
        return head_dim * math.log(s.original_max_position_embeddings / (num_rotations * 2 * math.pi)) / (
            2 * math.log(theta))

    low, high = correction_dim(s.beta_fast), correction_dim(s.beta_slow)
    if s.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001  # no zero-width ramp
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    is_extrapolated = 1 - ramp  # [head_dim // 2] 1: keep the frequency, 0: interpolate it
    pos_freqs = theta ** (torch.arange(0, head_dim, 2).float() / head_dim)  # rounded as transformers rounds them
    return 1.0 / (s.factor * pos_freqs) * (1 - is_extrapolated) + 1.0 / pos_freqs * is_extrapolated


class RotaryEmbedding(nn.Module):
    """Rotate-half (GPT-NeoX / HF Llama) RoPE with a lazily grown fp32 cos/sin table."""

    def __init__(self, head_dim: int, theta: float, scaling: RopeScaling | None, rotary_dim: int | None = None) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.inv_freq = rope_inv_freq(head_dim, theta, scaling)  # [head_dim // 2], fp32, host
        # YaRN scales cos and sin (the table), so every rotation path sees the same values.
        self.attention_factor = 1.0 if scaling is None else scaling.attention_factor
        if rotary_dim is not None:
            # Partial RoPE (models/partial_rotary.py): the rotated pairs' frequencies, then zero frequencies (cos 1,
            # sin 0) for the pass-through dims, which the loader moved into the remaining rotate-half pairs.
            rotated = rope_inv_freq(rotary_dim, theta, scaling)
            self.inv_freq = torch.cat([rotated, torch.zeros(head_dim // 2 - rotary_dim // 2)])
        self._cos_sin: torch.Tensor | None = None  # [num_cached_positions, 2, head_dim], fp32

    def reserve(self, num_positions: int, device: torch.device) -> torch.Tensor:
        """Grow the table to cover positions [0, num_positions) on `device`; returns it.

        CUDA graphs call this before capture: a replay must never need a bigger table than the captured one.
        """
        table = self._cos_sin
        if table is None or table.shape[0] < num_positions or table.device != device:
            size = max(1024, 1 << max(num_positions - 1, 1).bit_length())
            inv_freq = self.inv_freq.to(device)
            freqs = torch.outer(torch.arange(size, device=device, dtype=torch.float32), inv_freq)
            emb = torch.cat([freqs, freqs], dim=-1)  # [size, head_dim]
            table = torch.stack([emb.cos(), emb.sin()], dim=1)
            if self.attention_factor != 1.0:
                table = table * self.attention_factor
            self._cos_sin = table
        return table

    def cos_sin(self, positions: torch.Tensor, max_seq_len: int) -> torch.Tensor:
        """[num_tokens, 2, head_dim] fp32; `max_seq_len` (a host int) bounds the positions, avoiding a sync."""
        return self.reserve(max_seq_len, positions.device)[positions]

    @staticmethod
    def rotate_qk(
        q: torch.Tensor,  # [num_tokens, num_heads, head_dim]
        k: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim]
        cos_sin: torch.Tensor,  # [num_tokens, 2, head_dim] fp32
        fused_policy: str,  # the calling layer's
    ) -> tuple[torch.Tensor, torch.Tensor]:  # (rotated q, rotated k), same shapes
        """`apply` to q and k; the fused kernel rotates both in place (views into one qkv tensor are fine)."""
        if fused_kernels.use_fused(fused_policy, q):
            fused_kernels.apply_rope_(q, k, cos_sin)
            return q, k
        return RotaryEmbedding.apply(q, cos_sin), RotaryEmbedding.apply(k, cos_sin)

    @staticmethod
    def apply(x: torch.Tensor, cos_sin: torch.Tensor) -> torch.Tensor:
        """x: [num_tokens, num_heads, head_dim]; cos_sin: [num_tokens, 2, head_dim]."""
        cos, sin = cos_sin.to(x.dtype).unsqueeze(2).unbind(1)  # each [num_tokens, 1, head_dim]
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class OffsetRMSNorm(RMSNorm):
    """Gemma's and Qwen3-Next's RMSNorm: x / rms(x) * (1 + weight), all in fp32 and rounded once (checkpoints store
    weight - 1). The fused kernel's offset form computes the same, up to the order of the mean's fp32 sum."""

    is_offset = True

    def reference(self, x: torch.Tensor) -> torch.Tensor:  # [..., size]
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (normed * (1.0 + self.weight.float())).to(x.dtype)


ACTIVATIONS = ("silu", "gelu_tanh")


class GatedMLP(fused_kernels.UsesFusedKernels, nn.Module):
    """down(act(gate(x)) * up(x)) with gate and up fused into one [2 * inter, hidden] matmul; act is SiLU (Llama) or
    GELU with the tanh approximation (Gemma)."""

    def __init__(self, hidden_size: int, intermediate_size: int, activation: str = "silu") -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown MLP activation {activation!r}; supported: {', '.join(ACTIVATIONS)}")
        self.activation = activation
        self.intermediate_size = intermediate_size
        self.gate_up_proj = nn.Linear(hidden_size, 2 * intermediate_size, bias=False)  # rows: [gate; up]
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [num_tokens, hidden] -> same
        gate_up = self.gate_up_proj(x)  # [num_tokens, 2 * inter]
        if self.activation == "silu" and fused_kernels.use_fused(self.fused_policy, gate_up):
            return self.down_proj(fused_kernels.silu_and_mul(gate_up))
        gate, up = gate_up.chunk(2, dim=-1)  # Tensor.split's Python wrapper costs twice chunk's C call
        act = F.silu(gate) if self.activation == "silu" else F.gelu(gate, approximate="tanh")
        return self.down_proj(act * up)
