"""The attention-backend plug point: a Protocol plus a registry."""

from __future__ import annotations

from typing import Protocol

import torch

from specbench.attention.metadata import AttentionMetadata
from specbench.kv.kv_cache import KVCache
from specbench.registry import Registry


class AttentionBackend(Protocol):
    name: str
    supports_cuda_graphs: bool  # forward may be captured once and replayed on refreshed metadata buffers

    def begin_forward(self, md: AttentionMetadata, where: str) -> None:
        """Called once per forward before any layer; runs debug invariants."""

    def forward(
        self,
        layer: int,
        q: torch.Tensor,  # [num_tokens, num_heads, head_dim]
        k: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim]
        v: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim]
        kv_cache: KVCache,
        md: AttentionMetadata,
    ) -> torch.Tensor:  # [num_tokens, num_heads, head_dim]
        """Write k/v at md.slot_mapping into the layer's cache, then `attend_stored`."""

    def attend_stored(
        self,
        layer: int,
        q: torch.Tensor,  # [num_tokens, num_heads, head_dim]
        kv_cache: KVCache,
        md: AttentionMetadata,
    ) -> torch.Tensor:  # [num_tokens, num_heads, head_dim]
        """Attend causally over the layer's cache, which already holds this forward's K/V at md.slot_mapping
        (written by `forward`, or by a projection that stores them itself: models/decode_gemv.py)."""


ATTENTION_BACKENDS: Registry[AttentionBackend] = Registry("attention backend")


@ATTENTION_BACKENDS.register("torch")
def _torch_backend(check_invariants: bool) -> AttentionBackend:
    from specbench.attention.torch_ref import TorchPagedAttention

    return TorchPagedAttention(check_invariants)


@ATTENTION_BACKENDS.register("triton")
def _triton_backend(check_invariants: bool) -> AttentionBackend:
    from specbench.attention.triton_backend import TritonPagedAttention

    return TritonPagedAttention(check_invariants)


@ATTENTION_BACKENDS.register("flashinfer")
def _flashinfer_backend(check_invariants: bool) -> AttentionBackend:
    from specbench.attention.flashinfer_backend import FlashInferPagedAttention

    return FlashInferPagedAttention(check_invariants)


def create_backend(name: str, *, check_invariants: bool = False) -> AttentionBackend:
    """`check_invariants`: run the debug invariants on every forward (the engine's debug_invariants)."""
    return ATTENTION_BACKENDS.create(name, check_invariants)
