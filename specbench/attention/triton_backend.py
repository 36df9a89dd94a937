"""Paged attention through the Triton kernels: KV store, then one ragged causal attention launch per layer.

Same metadata contract as the torch reference; dtypes other than fp16/bf16/fp32 go through the reference instead.
"""

from __future__ import annotations

import torch

from specbench.attention.invariants import check_metadata
from specbench.attention.metadata import AttentionMetadata
from specbench.attention.score_params import PLAIN, ScoreParams
from specbench.attention.torch_ref import TorchPagedAttention, check_tree_kind
from specbench.attention.tree_mask import is_verify_layout
from specbench.errors import SpecbenchError
from specbench.kv.kv_cache import KVCache
from specbench.execution_paths import PathRecorder

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


class TritonPagedAttention:
    name = "triton"
    supports_cuda_graphs = True  # launches depend on host ints only, and padding slots (-1) are skipped
    # Masks with each layer's key window (KindMetadata.key_window): every key-window kind, no other (tree forwards:
    # full layers only, check_tree_kind).
    attends_key_windows = True
    supported_kinds: frozenset[str] = frozenset()

    def __init__(self, paths: PathRecorder | None = None, check_invariants: bool = False) -> None:
        self.paths = paths if paths is not None else PathRecorder()  # check_invariants: the engine's debug_invariants
        try:
            from specbench.kernels.kv_store import store_kv
            from specbench.kernels.paged_attention import paged_attention, runs_on
            from specbench.kernels.runtime import CPU_HINT
        except ImportError as e:
            raise SpecbenchError(f"attention backend 'triton' needs the triton package ({e})") from None
        self._store_kv, self._paged_attention, self._runs_on = store_kv, paged_attention, runs_on
        self._cpu_hint = CPU_HINT
        self._fallback = TorchPagedAttention(check_invariants=check_invariants)
        self.check_invariants = check_invariants

    def begin_forward(self, md: AttentionMetadata, where: str) -> None:
        self.paths.record("attention.triton")
        if self.check_invariants:
            check_metadata(md, where)
        if not self._runs_on(md.seq_lens.device):
            raise SpecbenchError(
                f"attention backend 'triton' runs on CUDA, not {md.seq_lens.device.type}; "
                f"use attention backend 'torch' there ({self._cpu_hint})"
            )

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
        k_cache, v_cache = kv_cache.k[layer], kv_cache.v[layer]
        if q.dtype not in SUPPORTED_DTYPES or k_cache.dtype not in SUPPORTED_DTYPES:
            return self._fallback.forward(layer, q, k, v, kv_cache, md, score)
        self._store_kv(k, v, k_cache, v_cache, md.slot_mapping)
        return self.attend_stored(layer, q, kv_cache, md, score)

    def attend_stored(
        self,
        layer: int,
        q: torch.Tensor,  # [num_tokens, num_heads, head_dim]
        kv_cache: KVCache,
        md: AttentionMetadata,
        score: ScoreParams = PLAIN,
    ) -> torch.Tensor:  # [num_tokens, num_heads, head_dim]
        k_cache, v_cache = kv_cache.k[layer], kv_cache.v[layer]
        if q.dtype not in SUPPORTED_DTYPES or k_cache.dtype not in SUPPORTED_DTYPES:
            return self._fallback.attend_stored(layer, q, kv_cache, md, score)
        if md.tree is not None:
            return self._tree_attention(layer, q, kv_cache, md, score)
        window = md.key_window(layer)
        return self._paged_attention(
            q, k_cache, v_cache, md.query_start_loc, md.seq_lens, md.block_tables,
            max_query_len=md.max_query_len, max_seq_len=md.max_seq_len,
            scale=score.scale, softcap=score.softcap, sinks=score.sinks,
            sliding_window=None if window is None else window.sliding_window,
            window_starts=None if window is None else window.window_starts,
        )

    def _tree_attention(self, layer: int, q: torch.Tensor, kv_cache: KVCache, md: AttentionMetadata,
                        score: ScoreParams) -> torch.Tensor:
        """A tree forward through the Triton tree kernel (bitmask over its request's tree rows): a tree verify (tree
        rows = its queries), or a tree draft step (its queries the last of more tree rows: `tree_rows`)."""
        assert md.tree is not None
        check_tree_kind(md, layer, score)
        from specbench.kernels.tree_attention import pack_tree_mask, tree_attention

        self.paths.record("attention.tree_triton")
        packed = pack_tree_mask(md.tree.mask) if md.tree.packed is None else md.tree.packed  # packed: graph buffer
        tree_rows = None if is_verify_layout(md) else md.tree.tree_rows
        assert is_verify_layout(md) or tree_rows is not None, "a tree draft step without its tree_rows"
        return tree_attention(q, kv_cache.k[layer], kv_cache.v[layer], md.query_start_loc, md.seq_lens,
                              md.block_tables, packed, max_query_len=md.max_query_len, scale=score.scale,
                              num_tree_rows=tree_rows)
