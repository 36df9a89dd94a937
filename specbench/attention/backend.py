"""The attention-backend plug point: a Protocol plus a registry."""

from __future__ import annotations

from typing import Protocol

import torch

from specbench.attention.metadata import AttentionMetadata
from specbench.attention.score_params import PLAIN, ScoreParams
from specbench.execution_paths import PathRecorder
from specbench.kv.kv_cache import KVCache
from specbench.registry import Registry


class AttentionBackend(Protocol):
    name: str
    supports_cuda_graphs: bool  # forward may be captured once and replayed on refreshed metadata buffers
    # The attention kinds (attention/kinds.py) this backend attends: every key-window kind (AttentionKind.is_key_window,
    # masked with KindMetadata.key_window) when attends_key_windows, and the kinds named in supported_kinds (their own
    # kernels). A model whose layers declare another kind refuses the backend at load (LayerKinds.require_backend), so
    # no layer silently runs full attention.
    attends_key_windows: bool
    supported_kinds: frozenset[str]
    # The engine's record of the execution paths its forwards take (execution_paths.py): begin_forward records the
    # backend's own, the layers theirs (every layer is handed the backend).
    paths: PathRecorder
    check_invariants: bool  # the engine's debug_invariants: begin_forward (and the model's kind checks) run them

    def begin_forward(self, md: AttentionMetadata, where: str) -> None:
        """Called once per forward before any layer (and before each graph replay); runs debug invariants and
        records `attention.<name>`."""

    def forward(
        self,
        layer: int,
        q: torch.Tensor,  # [num_tokens, num_heads, head_dim]
        k: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim]
        v: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim]
        kv_cache: KVCache,
        md: AttentionMetadata,
        score: ScoreParams = PLAIN,
    ) -> torch.Tensor:  # [num_tokens, num_heads, head_dim]
        """Write k/v at md.slot_mapping into the layer's cache, then `attend_stored`."""

    def attend_stored(
        self,
        layer: int,
        q: torch.Tensor,  # [num_tokens, num_heads, head_dim]
        kv_cache: KVCache,
        md: AttentionMetadata,
        score: ScoreParams = PLAIN,
    ) -> torch.Tensor:  # [num_tokens, num_heads, head_dim]
        """Attend causally over the layer's cache, which already holds this forward's K/V at md.slot_mapping
        (written by `forward`, or by a projection that stores them itself: models/decode_gemv.py), scoring keys as
        `score` says (the layer's scale, soft-cap and sinks)."""


ATTENTION_BACKENDS: Registry[AttentionBackend] = Registry("attention backend")


@ATTENTION_BACKENDS.register("torch")
def _torch_backend(paths: PathRecorder, check_invariants: bool) -> AttentionBackend:
    from specbench.attention.torch_ref import TorchPagedAttention

    return TorchPagedAttention(paths, check_invariants)


@ATTENTION_BACKENDS.register("triton")
def _triton_backend(paths: PathRecorder, check_invariants: bool) -> AttentionBackend:
    from specbench.attention.triton_backend import TritonPagedAttention

    return TritonPagedAttention(paths, check_invariants)


@ATTENTION_BACKENDS.register("flashinfer")
def _flashinfer_backend(paths: PathRecorder, check_invariants: bool) -> AttentionBackend:
    from specbench.attention.flashinfer_backend import FlashInferPagedAttention

    return FlashInferPagedAttention(paths, check_invariants)


def create_backend(name: str, paths: PathRecorder | None = None, *, check_invariants: bool = False
                   ) -> AttentionBackend:
    """`paths`: the engine's recorder; None: a private one (a model loaded outside an engine).
    `check_invariants`: run the debug invariants on every forward (the engine's debug_invariants)."""
    return ATTENTION_BACKENDS.create(name, paths if paths is not None else PathRecorder(), check_invariants)


class UncheckedBackend:
    """`inner` as a CUDA-graph capture or replay forward sees it: the per-layer debug checks off (they read the
    metadata's host copies, which a replay's static buffers never refresh; the graph runner checks each replay's
    real metadata instead). Everything else is the inner backend's."""

    check_invariants = False

    def __init__(self, inner: AttentionBackend) -> None:
        self.inner = inner
        self.name = inner.name
        self.supports_cuda_graphs = inner.supports_cuda_graphs
        self.attends_key_windows = inner.attends_key_windows
        self.supported_kinds = inner.supported_kinds
        self.paths = inner.paths

    def begin_forward(self, md: AttentionMetadata, where: str) -> None:
        self.inner.begin_forward(md, where)

    def forward(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv_cache: KVCache,
                md: AttentionMetadata, score: ScoreParams = PLAIN) -> torch.Tensor:
        return self.inner.forward(layer, q, k, v, kv_cache, md, score)

    def attend_stored(self, layer: int, q: torch.Tensor, kv_cache: KVCache, md: AttentionMetadata,
                      score: ScoreParams = PLAIN) -> torch.Tensor:
        return self.inner.attend_stored(layer, q, kv_cache, md, score)
