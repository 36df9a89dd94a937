"""Readable batched paged attention in plain torch: the reference every kernel is tested against."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from specbench.attention.invariants import check_metadata, invariants_enabled
from specbench.attention.metadata import AttentionMetadata
from specbench.kv.kv_cache import KVCache
from specbench.execution_paths import PathRecorder


class TorchPagedAttention:
    name = "torch"
    supports_cuda_graphs = False  # reads the metadata's host tuples, which a graph replay cannot refresh

    def __init__(self, paths: PathRecorder | None = None) -> None:
        self.paths = paths if paths is not None else PathRecorder()
        self.check_invariants = invariants_enabled()

    def begin_forward(self, md: AttentionMetadata, where: str) -> None:
        self.paths.record("attention.torch")
        if self.check_invariants:
            check_metadata(md, where)

    def forward(
        self,
        layer: int,
        q: torch.Tensor,  # [num_tokens, num_heads, head_dim]
        k: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim]
        v: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim]
        kv_cache: KVCache,
        md: AttentionMetadata,
    ) -> torch.Tensor:  # [num_tokens, num_heads, head_dim]
        k_cache, v_cache = kv_cache.flat(layer)
        k_cache.index_copy_(0, md.slot_mapping, k.to(k_cache.dtype))
        v_cache.index_copy_(0, md.slot_mapping, v.to(v_cache.dtype))
        return self.attend_stored(layer, q, kv_cache, md)

    def attend_stored(
        self,
        layer: int,
        q: torch.Tensor,  # [num_tokens, num_heads, head_dim]
        kv_cache: KVCache,
        md: AttentionMetadata,
    ) -> torch.Tensor:  # [num_tokens, num_heads, head_dim]
        k_cache, v_cache = kv_cache.flat(layer)
        device = q.device
        num_reqs, block_size = md.num_reqs, md.block_size
        key_pos = torch.arange(md.max_seq_len, device=device)  # [max_seq]
        blocks = md.block_tables.long().gather(1, (key_pos // block_size).expand(num_reqs, -1))
        key_slots = blocks * block_size + key_pos % block_size  # [num_reqs, max_seq]
        keys = k_cache[key_slots].to(q.dtype)  # [num_reqs, max_seq, num_kv_heads, head_dim]
        values = v_cache[key_slots].to(q.dtype)

        qsl = md.query_start_loc.long()
        num_query = qsl[1:] - qsl[:-1]  # [num_reqs]
        j = torch.arange(md.max_query_len, device=device)  # [max_q]
        is_valid = j[None, :] < num_query[:, None]  # [num_reqs, max_q]
        token_idx = torch.where(is_valid, qsl[:-1, None] + j[None, :], 0)
        queries = q[token_idx]  # [num_reqs, max_q, num_heads, head_dim]
        num_visible = md.seq_lens.long()[:, None] - num_query[:, None] + j[None, :] + 1  # [num_reqs, max_q]
        # Padding rows see one key so softmax stays finite; they are dropped below.
        num_visible = torch.where(is_valid, num_visible, 1)
        mask = key_pos[None, None, :] < num_visible[:, :, None]  # [num_reqs, max_q, max_seq]

        group = q.shape[1] // k_cache.shape[1]
        keys = keys.repeat_interleave(group, dim=2)
        values = values.repeat_interleave(group, dim=2)
        out = F.scaled_dot_product_attention(
            queries.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2), attn_mask=mask[:, None]
        )  # [num_reqs, num_heads, max_q, head_dim]
        return out.transpose(1, 2)[is_valid]
