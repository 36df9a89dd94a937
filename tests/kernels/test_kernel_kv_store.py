"""Paged KV store == index_copy_ at the slot mapping: strided inputs, dtype casts, padding slots skipped."""

from __future__ import annotations


import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

pytestmark = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)

from specbench.kernels.kv_store import store_kv  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def check_store(num_tokens, num_kv_heads, head_dim, block_size, num_blocks, src_dtype, cache_dtype, device, seed):
    gen = torch.Generator(device=device).manual_seed(seed)
    # k and v as views into one fused projection output, like SelfAttention's split.
    qkv = torch.randn(num_tokens, (2 + 2) * num_kv_heads * head_dim, generator=gen, device=device).to(src_dtype)
    k = qkv[:, 2 * num_kv_heads * head_dim:3 * num_kv_heads * head_dim].view(num_tokens, num_kv_heads, head_dim)
    v = qkv[:, 3 * num_kv_heads * head_dim:].view(num_tokens, num_kv_heads, head_dim)
    num_slots = num_blocks * block_size
    slots = torch.randperm(num_slots, generator=gen, device=device)[:num_tokens]
    slots[::5] = -1  # padding tokens (CUDA-graph batches) write nothing
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache = torch.randn(shape, generator=gen, device=device).to(cache_dtype)
    v_cache = torch.randn(shape, generator=gen, device=device).to(cache_dtype)
    expected_k, expected_v = k_cache.clone().view(num_slots, num_kv_heads, head_dim), v_cache.clone().view(
        num_slots, num_kv_heads, head_dim)
    is_real = slots >= 0
    expected_k.index_copy_(0, slots[is_real], k[is_real].to(cache_dtype))
    expected_v.index_copy_(0, slots[is_real], v[is_real].to(cache_dtype))
    store_kv(k, v, k_cache, v_cache, slots)
    assert torch.equal(k_cache.view_as(expected_k), expected_k)
    assert torch.equal(v_cache.view_as(expected_v), expected_v)


@pytest.mark.parametrize(
    "src_dtype, cache_dtype", [(torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16),
                               (torch.float16, torch.float16), (torch.float32, torch.float16)])
@pytest.mark.parametrize("head_dim, num_kv_heads, block_size", [(16, 2, 4), (24, 3, 16)])
def test_store_matches_index_copy(src_dtype, cache_dtype, head_dim, num_kv_heads, block_size):
    check_store(11, num_kv_heads, head_dim, block_size, 6, src_dtype, cache_dtype, DEVICE, seed=head_dim)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("num_tokens", [1, 64, 4096])
def test_gpu_store_llama8b_shapes(num_tokens):
    check_store(num_tokens, 8, 128, 16, 600, torch.bfloat16, torch.bfloat16, "cuda", seed=num_tokens)
