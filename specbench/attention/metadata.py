"""Attention metadata for one forward pass over a ragged batch of requests.

Contract (the invariants the seed bugs violated, checked by `invariants.py`):
request r contributes `num_query[r] = query_start_loc[r+1] - query_start_loc[r]`
consecutive query tokens. After this forward writes its K/V, request r has
`seq_lens[r]` keys in its paged cache, and query j of request r (0-based) sees
keys `[0, seq_lens[r] - num_query[r] + j]`, itself included. Hence
    positions[t] == visible_keys(t) - 1                       (INV-0)
    slot_mapping[t] == slot of (request r, position positions[t])   (INV-SLOT)
Metadata objects are frozen and built by `build_metadata` for every forward and
every draft step; nothing is edited in place between phases.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.attention.kind_metadata import KeyWindow, KindMetadata
from specbench.device_copy import host_tensor, tensor_to_device

# slot_mapping value of a padding query: its K/V is not stored (fixed-shape batches for CUDA graphs).
PADDING_SLOT = -1


@dataclass(frozen=True, slots=True)
class TreeMask:
    """The tree part of a tree forward's metadata (its layout and INV-TREE: tree_mask.py)."""

    mask: torch.Tensor  # [num_tokens, max_tree_rows] bool (device): query t sees tree row i of its request
    mask_cpu: torch.Tensor  # [num_tokens, max_tree_rows] bool, host copy (reference paths, debug checks)
    num_tree_rows: tuple[int, ...]  # [num_reqs] the last num_tree_rows[r] keys of request r are its tree rows
    # Every request's tree rows are exactly this forward's queries (a tree verify: what the Triton kernel takes);
    # False for a tree draft step, whose tree rows outnumber its queries.
    is_verify: bool = False
    # [num_tokens, ceil(max_tree_rows / 32)] int32, the mask packed for the Triton kernel (kernels/tree_attention.py
    # pack_tree_mask) once per forward: a CUDA graph's static buffer, filled before each replay. None: the backend
    # packs `mask` itself.
    packed: torch.Tensor | None = None
    # [num_reqs] int32 (device) num_tree_rows for the Triton kernel of a tree draft step; None for a tree verify
    # (its tree rows are its queries).
    tree_rows: torch.Tensor | None = None


@dataclass(frozen=True, slots=True)
class AttentionMetadata:
    positions: torch.Tensor  # [num_tokens] int64, RoPE position of each query token
    slot_mapping: torch.Tensor  # [num_tokens] int64, KV slot each token's K/V is written to
    query_start_loc: torch.Tensor  # [num_reqs + 1] int32, cu_num_query_tokens
    seq_lens: torch.Tensor  # [num_reqs] int32, keys in cache per request after this forward
    block_tables: torch.Tensor  # [num_reqs, max_num_blocks] int32, padded with 0
    block_size: int
    max_query_len: int
    max_seq_len: int
    # Host copies, kept so reference paths and debug checks never sync the device.
    query_start_loc_cpu: tuple[int, ...]  # [num_reqs + 1]
    seq_lens_cpu: tuple[int, ...]  # [num_reqs]
    positions_cpu: tuple[int, ...]  # [num_tokens]
    slot_mapping_cpu: tuple[int, ...]  # [num_tokens]
    block_tables_cpu: tuple[tuple[int, ...], ...]  # [num_reqs][num_blocks_r]
    # [num_layers] each layer's attention-kind metadata, built by the model's LayerKinds at the start of every forward
    # (layer_kinds.py); () = every layer plain causal attention.
    layer_kinds: tuple[KindMetadata, ...] = ()
    # A tree forward (tree verify or tree draft step, attention/tree_mask.py): which tree rows each query sees;
    # None = causal (every chain and plain forward).
    tree: TreeMask | None = None
    # Hybrid targets (Gated DeltaNet layers): each request's recurrent-state slot and whether its rows are verify rows
    # (recurrent/state_rows.py StateRows), attached by the engine to target forwards; None elsewhere.
    state_rows: object | None = None

    def kind_of(self, layer: int) -> KindMetadata | None:
        """Layer `layer`'s kind metadata; None when no kinds were attached (all layers full attention)."""
        return self.layer_kinds[layer] if self.layer_kinds else None

    def key_window(self, layer: int) -> KeyWindow | None:
        """What a masking kernel needs to attend layer `layer` (its kind metadata's key_window); None: plain causal."""
        return self.layer_kinds[layer].key_window() if self.layer_kinds else None

    @property
    def num_reqs(self) -> int:
        return len(self.seq_lens_cpu)

    @property
    def num_tokens(self) -> int:
        return self.query_start_loc_cpu[-1]


def slot_of(block_table: list[int] | tuple[int, ...], position: int, block_size: int) -> int:
    return block_table[position // block_size] * block_size + position % block_size


def build_metadata(
    *,
    positions: list[int],
    num_query: list[int],
    seq_lens: list[int],
    block_tables: list[list[int]],
    block_size: int,
    device: torch.device,
    slot_mapping: list[int] | None = None,
) -> AttentionMetadata:
    """Build metadata from host-side lists (the scheduler's view).

    `slot_mapping` defaults to the slot of each token's own position, which is
    what every correct phase uses; callers pass it explicitly only to express
    something else (fault injection in later tooling).
    """
    if slot_mapping is None:
        slot_mapping = []
        t = 0
        for r, n in enumerate(num_query):
            table = block_tables[r]
            slot_mapping.extend(slot_of(table, p, block_size) for p in positions[t:t + n])
            t += n
    cu = [0]
    for n in num_query:
        cu.append(cu[-1] + n)
    num_reqs, num_tokens = len(num_query), len(positions)
    max_blocks = max((len(b) for b in block_tables), default=0) or 1
    # Two host buffers (int64 per token, int32 per request), two copies: each separate pinned copy costs
    # ~15 us of host time, and per-row block-table tensors ~5 us per request.
    per_token = tensor_to_device(host_tensor([*positions, *slot_mapping], torch.int64), device)
    flat_tables = [block for blocks in block_tables for block in (*blocks, *(0,) * (max_blocks - len(blocks)))]
    per_request = tensor_to_device(host_tensor([*cu, *seq_lens, *flat_tables], torch.int32), device)
    return AttentionMetadata(
        positions=per_token[:num_tokens],
        slot_mapping=per_token[num_tokens:],
        query_start_loc=per_request[: num_reqs + 1],
        seq_lens=per_request[num_reqs + 1 : 2 * num_reqs + 1],
        block_tables=per_request[2 * num_reqs + 1 :].view(num_reqs, max_blocks),
        block_size=block_size,
        max_query_len=max(num_query, default=0),
        max_seq_len=max(seq_lens, default=0),
        query_start_loc_cpu=tuple(cu),
        seq_lens_cpu=tuple(seq_lens),
        positions_cpu=tuple(positions),
        slot_mapping_cpu=tuple(slot_mapping),
        block_tables_cpu=tuple(tuple(b) for b in block_tables),
    )
