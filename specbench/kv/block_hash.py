"""Content hashes of full KV blocks, chained: a block's hash covers its parent block's hash, its tokens (and the few
after it that KV in it was computed from, for a drafter that reads ahead) and an extra key (whatever else changes the
KV a block holds, e.g. which drafter writes its draft KV into the same block ids).

Two blocks with one hash hold the same KV: same tokens at the same positions after the same prefix. sha256 makes an
accidental collision (a wrong hit) negligible, as vLLM's sha256 option does; no token is ever compared again.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence

ROOT_HASH = b""  # the parent of a request's first block


def block_hash(parent: bytes, token_ids: Sequence[int], extra_key: bytes) -> bytes:
    """sha256 over (parent hash, extra key, the block's tokens as int64)."""
    digest = hashlib.sha256()
    digest.update(len(parent).to_bytes(1, "little"))
    digest.update(parent)
    digest.update(len(extra_key).to_bytes(2, "little"))
    digest.update(extra_key)
    digest.update(array("q", token_ids).tobytes())
    return digest.digest()


def extend_block_hashes(hashes: list[bytes], token_ids: Sequence[int], num_full_blocks: int, block_size: int,
                        extra_key: bytes, parent_of=lambda parent: parent, lookahead: int = 0) -> None:
    """Append the chained hashes of blocks len(hashes) .. num_full_blocks - 1 of `token_ids` to `hashes`; each covers
    its tokens and the `lookahead` tokens after it (KV written from later tokens: an EAGLE head's; the caller
    keeps (b + 1) * block_size + lookahead <= len(token_ids)). `parent_of`: what a block's hash takes as its
    parent's (identity; the hooks seam lets a mutant drop it)."""
    for b in range(len(hashes), num_full_blocks):
        parent = hashes[b - 1] if b else ROOT_HASH
        tokens = token_ids[b * block_size : (b + 1) * block_size + lookahead]
        hashes.append(block_hash(parent_of(parent), tokens, extra_key))
