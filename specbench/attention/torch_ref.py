"""Readable batched paged attention in plain torch: the reference every kernel is tested against."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from specbench.attention.invariants import check_metadata
from specbench.attention.metadata import AttentionMetadata
from specbench.attention.score_params import PLAIN, ScoreParams
from specbench.attention.tree_torch_ref import tree_attention_reference
from specbench.attention.window import check_window
from specbench.errors import SpecbenchError
from specbench.kv.kv_cache import KVCache
from specbench.execution_paths import PathRecorder


class TorchPagedAttention:
    name = "torch"
    supports_cuda_graphs = False  # reads the metadata's host tuples, which a graph replay cannot refresh
    # Masks with each layer's key window (KindMetadata.key_window): every key-window kind, no other (tree forwards:
    # full layers only, check_tree_kind).
    attends_key_windows = True
    supported_kinds: frozenset[str] = frozenset()

    def __init__(self, paths: PathRecorder | None = None, check_invariants: bool = False) -> None:
        self.paths = paths if paths is not None else PathRecorder()
        self.check_invariants = check_invariants  # the engine's debug_invariants

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
        score: ScoreParams = PLAIN,
    ) -> torch.Tensor:  # [num_tokens, num_heads, head_dim]
        k_cache, v_cache = kv_cache.flat(layer)
        k_cache.index_copy_(0, md.slot_mapping, k.to(k_cache.dtype))
        v_cache.index_copy_(0, md.slot_mapping, v.to(v_cache.dtype))
        return self.attend_stored(layer, q, kv_cache, md, score)

    def attend_stored(
        self,
        layer: int,
        q: torch.Tensor,  # [num_tokens, num_heads, head_dim]
        kv_cache: KVCache,
        md: AttentionMetadata,
        score: ScoreParams = PLAIN,
    ) -> torch.Tensor:  # [num_tokens, num_heads, head_dim]
        if md.tree is not None:
            self.paths.record("attention.tree_torch")
            return tree_attention(q, kv_cache, layer, md, score)
        k_cache, v_cache = kv_cache.flat(layer)
        window = md.key_window(layer)
        starts = None if window is None else window.window_starts
        return paged_attention_reference(q, k_cache, v_cache, md, window_starts=starts, sinks=score.sinks,
                                         softcap=score.softcap, scale=score.scale)


def tree_attention(q: torch.Tensor, kv_cache: KVCache, layer: int, md: AttentionMetadata,
                   score: ScoreParams = PLAIN) -> torch.Tensor:
    """A tree forward (md.tree) through the readable reference; every layer of it plain (full) attention."""
    check_tree_kind(md, layer, score)
    assert md.tree is not None
    return tree_attention_reference(q, kv_cache.k[layer], kv_cache.v[layer], md.query_start_loc, md.seq_lens,
                                    md.block_tables, md.tree.mask, scale=score.scale,
                                    num_tree_rows=md.tree.num_tree_rows)


def check_tree_kind(md: AttentionMetadata, layer: int, score: ScoreParams = PLAIN) -> None:
    """Tree forwards support full-attention layers scored by scaled q.k only: a window over tree rows, soft-capping
    and sinks are not defined for them yet."""
    kind_md = md.kind_of(layer)
    if kind_md is not None and not kind_md.kind.is_full:
        raise SpecbenchError(f"tree drafts need full-attention layers; layer {layer} has {kind_md.kind}")
    if score.softcap is not None or score.sinks is not None:
        raise SpecbenchError(f"tree drafts do not support soft-capping or attention sinks yet (layer {layer})")


def paged_attention_reference(
    q: torch.Tensor,  # [num_tokens, num_heads, head_dim]
    k_cache: torch.Tensor,  # [num_slots, num_kv_heads, head_dim], this forward's keys already stored
    v_cache: torch.Tensor,  # [num_slots, num_kv_heads, head_dim]
    md: AttentionMetadata,
    *,
    sliding_window: int | None = None,
    sinks: torch.Tensor | None = None,  # [num_heads], one extra logit per query head (gpt-oss)
    softcap: float | None = None,
    scale: float | None = None,
    window_starts: torch.Tensor | None = None,  # [num_tokens] int32, first key each query sees (the metadata's)
) -> torch.Tensor:  # [num_tokens, num_heads, head_dim]
    """Attention of each request's queries over its paged keys (the metadata contract), optionally windowed.

    `sliding_window` w: a query at position p sees keys max(0, p - w + 1) .. p (`window.py`). `sinks`: a logit
    per head added to every softmax denominator; it takes probability mass and contributes no value.
    `softcap` c: scores become c * tanh(scores / c) before masking (Gemma-2). All None: plain causal SDPA.
    `window_starts`: query t sees keys from window_starts[t] on (a sliding window's metadata, attention/kinds.py).
    """
    # Each request's keys in position order: its blocks in block-table order, each block's slots in order.
    blocks = md.block_tables[:, : -(-md.max_seq_len // md.block_size)].long()  # [num_reqs, blocks for max_seq]
    keys = _paged_rows(k_cache, blocks, md).to(q.dtype)  # [num_reqs, max_seq, num_kv_heads, head_dim]
    values = _paged_rows(v_cache, blocks, md).to(q.dtype)
    key_pos = torch.arange(md.max_seq_len, device=q.device)  # [max_seq]

    layout = _QueryLayout.of(md)
    is_valid, token_idx = layout.is_valid, layout.token_idx
    queries = q[token_idx]  # [num_reqs, max_q, num_heads, head_dim]
    mask = layout.visible_key_mask(key_pos, sliding_window)  # [num_reqs, max_q, max_seq]
    if window_starts is not None:  # the window as the metadata's builder laid it out, query by query
        starts = torch.where(is_valid, window_starts.long()[token_idx], 0)  # [num_reqs, max_q]
        mask &= key_pos[None, None, :] >= starts[:, :, None]

    group = q.shape[1] // k_cache.shape[1]
    if sinks is None and softcap is None and q.device.type == "cpu":
        # The CPU kernel reads each K/V head for its whole query-head group itself (enable_gqa): the same result bit
        # for bit as the copies below (checked over dtypes and shapes, session 23), without them. CUDA's
        # memory-efficient kernel does not take enable_gqa (another kernel would run), so other devices keep the copies.
        out = F.scaled_dot_product_attention(
            queries.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2), attn_mask=mask[:, None],
            scale=scale, enable_gqa=group > 1,
        )  # [num_reqs, num_heads, max_q, head_dim]
        return out.transpose(1, 2)[is_valid]
    keys = keys.repeat_interleave(group, dim=2)
    values = values.repeat_interleave(group, dim=2)
    if sinks is None and softcap is None:
        out = F.scaled_dot_product_attention(
            queries.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2), attn_mask=mask[:, None],
            scale=scale,
        )  # [num_reqs, num_heads, max_q, head_dim]
    else:
        out = _explicit_softmax_attention(queries.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2),
                                          mask[:, None], sinks=sinks, softcap=softcap, scale=scale)
    return out.transpose(1, 2)[is_valid]


def _paged_rows(
    cache: torch.Tensor,  # [num_slots, num_kv_heads, head_dim], slot = block * block_size + offset
    blocks: torch.Tensor,  # [num_reqs, num_blocks] int64, the block table's first blocks
    md: AttentionMetadata,
) -> torch.Tensor:  # [num_reqs, max_seq_len, num_kv_heads, head_dim]: key position i of request r at [r, i]
    by_block = cache.unflatten(0, (-1, md.block_size))  # [num_blocks, block_size, num_kv_heads, head_dim]
    return by_block[blocks].flatten(1, 2)[:, : md.max_seq_len]


def visible_key_mask(md: AttentionMetadata, sliding_window: int | None = None) -> torch.Tensor:
    """[num_reqs, max_query_len, max_seq_len] bool: key position i is visible to query j of request r.

    Query j sits at position p = seq_lens[r] - num_query[r] + j and sees keys first_visible_key(p, w) .. p.
    Padding rows (j >= num_query[r]) see key 0 only, so a softmax over them stays finite; callers drop them.
    """
    key_pos = torch.arange(md.max_seq_len, device=md.seq_lens.device)  # [max_seq]
    return _QueryLayout.of(md).visible_key_mask(key_pos, sliding_window)


@dataclass(frozen=True, slots=True)
class _QueryLayout:
    """Where each request's queries sit in the padded [num_reqs, max_query_len] grid, derived from the metadata
    once per attention call (the reference's gather of queries and its mask both read it)."""

    is_valid: torch.Tensor  # [num_reqs, max_q] bool, query j of request r exists (j < num_query[r])
    token_idx: torch.Tensor  # [num_reqs, max_q] int64, that query's token in the forward; 0 for padding
    position: torch.Tensor  # [num_reqs, max_q] int64, that query's key position; 0 for padding

    @staticmethod
    def of(md: AttentionMetadata) -> _QueryLayout:
        qsl = md.query_start_loc.long()
        num_query = qsl.diff()[:, None]  # [num_reqs, 1]
        j = torch.arange(md.max_query_len, device=qsl.device)  # [max_q]
        is_valid = j < num_query  # [num_reqs, max_q]
        token_idx = torch.where(is_valid, qsl[:-1, None] + j, 0)
        position = md.seq_lens.long()[:, None] - num_query + j
        return _QueryLayout(is_valid, token_idx, torch.where(is_valid, position, 0))

    def visible_key_mask(
        self,
        key_pos: torch.Tensor,  # [max_seq] arange
        sliding_window: int | None,
    ) -> torch.Tensor:  # [num_reqs, max_q, max_seq] bool, as visible_key_mask
        check_window(sliding_window)
        mask = key_pos[None, None, :] <= self.position[:, :, None]
        if sliding_window is not None:
            mask &= key_pos[None, None, :] > self.position[:, :, None] - sliding_window
        return mask


def _explicit_softmax_attention(
    queries: torch.Tensor,  # [num_reqs, num_heads, max_q, head_dim]
    keys: torch.Tensor,  # [num_reqs, num_heads, max_seq, head_dim]
    values: torch.Tensor,  # [num_reqs, num_heads, max_seq, head_dim]
    mask: torch.Tensor,  # [num_reqs, 1, max_q, max_seq] bool
    *,
    sinks: torch.Tensor | None,  # [num_heads]
    softcap: float | None,
    scale: float | None,
) -> torch.Tensor:  # [num_reqs, num_heads, max_q, head_dim], queries' dtype
    """Softmax attention spelled out in fp32, for what SDPA cannot express (soft-capping, sinks)."""
    scale = queries.shape[-1] ** -0.5 if scale is None else scale
    scores = queries.float() @ keys.float().transpose(-1, -2) * scale  # [num_reqs, num_heads, max_q, max_seq]
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)
    scores = scores.masked_fill(~mask, float("-inf"))
    if sinks is not None:
        # The sink is one more column of the softmax; its probability is dropped, so it only shrinks the rest.
        sink_col = sinks.float().view(1, -1, 1, 1).expand(*scores.shape[:3], 1)
        probs = torch.softmax(torch.cat([scores, sink_col], dim=-1), dim=-1)[..., :-1]
    else:
        probs = torch.softmax(scores, dim=-1)
    return (probs @ values.float()).to(queries.dtype)
