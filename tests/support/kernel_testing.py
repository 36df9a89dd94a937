"""Random paged batches and poisoned allocations, shared by the kernel tests and `scripts/bench_kernels.py`."""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass

import torch

from specbench.attention.metadata import AttentionMetadata, build_metadata

POISON_INT = -987654321
RERUN_REASON = "triton was imported before TRITON_INTERPRET=1 was set; test_kernel_subprocess.py reruns these"


def kernels_runnable_here() -> bool:
    """CUDA, or a CPU process whose first `import triton` saw TRITON_INTERPRET=1.

    Triton's own jit helpers (tl.zeros, tl.sum, ...) are bound to the interpreter when triton is
    imported; setting the variable later leaves them compiled-only and every kernel fails.
    """
    if torch.cuda.is_available():
        return True
    import triton.language.standard as standard
    from triton.runtime.interpreter import InterpretedFunction

    from specbench.kernels.attention_kernels import paged_attention_kernel

    return isinstance(standard.zeros, InterpretedFunction) and isinstance(paged_attention_kernel, InterpretedFunction)


@dataclass(frozen=True)
class PagedBatch:
    md: AttentionMetadata
    q: torch.Tensor  # [num_tokens, num_heads, head_dim]
    k: torch.Tensor  # [num_tokens, num_kv_heads, head_dim], this forward's keys
    v: torch.Tensor  # [num_tokens, num_kv_heads, head_dim]
    k_cache: torch.Tensor  # [num_blocks, block_size, num_kv_heads, head_dim], random (never zeros)
    v_cache: torch.Tensor  # [num_blocks, block_size, num_kv_heads, head_dim]


def random_paged_batch(
    *,
    num_query: list[int],  # [num_reqs] query tokens per request
    num_context: list[int],  # [num_reqs] keys already cached before this forward
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    block_size: int,
    dtype: torch.dtype,
    device: torch.device | str,
    seed: int = 0,
    num_spare_blocks: int = 3,
) -> PagedBatch:
    """Each request owns a random, non-contiguous set of blocks; spare blocks hold garbage nobody may read."""
    rng = random.Random(seed)
    seq_lens = [c + n for c, n in zip(num_context, num_query)]
    blocks_per_req = [-(-s // block_size) for s in seq_lens]
    num_blocks = sum(blocks_per_req) + num_spare_blocks
    pool = list(range(num_blocks))
    rng.shuffle(pool)
    block_tables, start = [], 0
    for n in blocks_per_req:
        block_tables.append(pool[start:start + n])
        start += n
    positions = [c + j for c, n in zip(num_context, num_query) for j in range(n)]
    md = build_metadata(positions=positions, num_query=num_query, seq_lens=seq_lens, block_tables=block_tables,
                        block_size=block_size, device=torch.device(device))
    gen = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, device=device, dtype=torch.float32).to(dtype)

    num_tokens = len(positions)
    return PagedBatch(
        md=md,
        q=randn(num_tokens, num_heads, head_dim),
        k=randn(num_tokens, num_kv_heads, head_dim),
        v=randn(num_tokens, num_kv_heads, head_dim),
        k_cache=randn(num_blocks, block_size, num_kv_heads, head_dim),
        v_cache=randn(num_blocks, block_size, num_kv_heads, head_dim),
    )


def _poison(t: torch.Tensor) -> torch.Tensor:
    if t.is_floating_point():
        return t.fill_(float("nan"))
    if t.dtype != torch.bool and t.numel():
        return t.fill_(POISON_INT if torch.iinfo(t.dtype).min <= POISON_INT else torch.iinfo(t.dtype).max)
    return t


@contextlib.contextmanager
def poisoned_allocations():
    """torch.empty / empty_like return NaN- or POISON_INT-filled tensors: unwritten outputs and read-before-write
    scratch buffers then show up in the results."""
    real_empty, real_empty_like = torch.empty, torch.empty_like
    torch.empty = lambda *args, **kwargs: _poison(real_empty(*args, **kwargs))
    torch.empty_like = lambda *args, **kwargs: _poison(real_empty_like(*args, **kwargs))
    try:
        yield
    finally:
        torch.empty, torch.empty_like = real_empty, real_empty_like
