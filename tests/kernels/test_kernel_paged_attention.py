"""KV store + paged attention kernels == the torch reference backend, for prefill/extend, decode and verify.

On CPU the kernels run under TRITON_INTERPRET=1 with small shapes; on CUDA the `gpu` tests add real ones.
"""

from __future__ import annotations

import random

import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

pytestmark = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)

from specbench.attention.torch_ref import TorchPagedAttention  # noqa: E402
from specbench.kernels.kv_store import store_kv  # noqa: E402
from specbench.kernels.paged_attention import paged_attention, plan_launch  # noqa: E402
from tests.support.kernel_testing import PagedBatch, poisoned_allocations, random_paged_batch  # noqa: E402
from specbench.kv.kv_cache import KVCache, KVCacheSpec  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
TOLERANCE = {torch.float32: 2e-5, torch.float16: 3e-3, torch.bfloat16: 3e-2}


def reference(batch: PagedBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(attention output, k_cache, v_cache) of the torch backend on copies of the batch's caches."""
    num_blocks, block_size, num_kv_heads, head_dim = batch.k_cache.shape
    cache = KVCache(KVCacheSpec(1, num_kv_heads, head_dim, batch.k_cache.dtype), 0, block_size, batch.q.device)
    cache.k[0], cache.v[0] = batch.k_cache.clone(), batch.v_cache.clone()
    out = TorchPagedAttention().forward(0, batch.q, batch.k, batch.v, cache, batch.md)
    return out, cache.k[0], cache.v[0]


def check_against_reference(batch: PagedBatch, **launch) -> None:
    expected, expected_k, expected_v = reference(batch)
    k_cache, v_cache, md = batch.k_cache.clone(), batch.v_cache.clone(), batch.md
    with poisoned_allocations():
        store_kv(batch.k, batch.v, k_cache, v_cache, md.slot_mapping)
        out = paged_attention(batch.q, k_cache, v_cache, md.query_start_loc, md.seq_lens, md.block_tables,
                              max_query_len=md.max_query_len, max_seq_len=md.max_seq_len, **launch)
    assert torch.equal(k_cache, expected_k) and torch.equal(v_cache, expected_v)
    assert not out.isnan().any(), "some output elements were never written (or read unwritten scratch)"
    tol = TOLERANCE[batch.q.dtype]
    torch.testing.assert_close(out.float(), expected.float(), atol=tol, rtol=tol)


# (num_query, num_context, heads, kv_heads, head_dim, block_size, dtype, launch overrides)
CPU_CASES = {
    "prefill_extend_mixed": ([5, 1, 9], [0, 19, 6], 4, 2, 16, 4, torch.float32, {}),
    "prefill_multi_qblock": ([21, 3], [2, 0], 4, 2, 16, 4, torch.float32, {"block_m": 16, "block_n": 16}),
    "decode_split_kv": ([1, 1, 1], [40, 2, 69], 4, 2, 16, 4, torch.float32, {"num_splits": 3, "block_n": 16}),
    "verify_split_kv_bf16": ([4, 4], [29, 60], 8, 2, 32, 16, torch.bfloat16, {"num_splits": 2, "block_n": 16}),
    "verify_ragged_fp16_odd_dims": ([3, 1, 4], [13, 30, 0], 6, 2, 24, 8, torch.float16, {"num_splits": 2}),
    "mqa_head_dim_64": ([2, 1], [17, 33], 4, 1, 64, 16, torch.float32, {}),
}


@pytest.mark.parametrize("case", sorted(CPU_CASES))
def test_matches_reference(case):
    num_query, num_context, heads, kv_heads, head_dim, block_size, dtype, launch = CPU_CASES[case]
    batch = random_paged_batch(num_query=num_query, num_context=num_context, num_heads=heads,
                               num_kv_heads=kv_heads, head_dim=head_dim, block_size=block_size, dtype=dtype,
                               device=DEVICE, seed=len(case))
    check_against_reference(batch, **launch)


@pytest.mark.parametrize("seed", range(3))
def test_random_shapes_match_reference(seed):
    rng = random.Random(seed)
    num_reqs = rng.randint(1, 3)
    kv_heads, group = rng.choice([(1, 2), (2, 2), (2, 1), (1, 4)])
    batch = random_paged_batch(
        num_query=[rng.choice([1, 3, rng.randint(1, 12)]) for _ in range(num_reqs)],
        num_context=[rng.randint(0, 50) for _ in range(num_reqs)],
        num_heads=kv_heads * group, num_kv_heads=kv_heads, head_dim=rng.choice([16, 32]),
        block_size=rng.choice([2, 4, 16]), dtype=rng.choice([torch.float32, torch.float16]), device=DEVICE, seed=seed,
    )
    check_against_reference(batch, num_splits=rng.choice([None, 1, 2]), block_n=rng.choice([None, 16]))


def test_keys_past_a_stale_max_seq_len_are_still_attended():
    """A CUDA graph replays the grid of its capture: sequences may have grown past the max_seq_len it saw."""
    batch = random_paged_batch(num_query=[1, 1], num_context=[69, 20], num_heads=4, num_kv_heads=2, head_dim=16,
                               block_size=4, dtype=torch.float32, device=DEVICE, seed=9)
    expected, k_cache, v_cache = reference(batch)
    md = batch.md
    with poisoned_allocations():
        out = paged_attention(batch.q, k_cache, v_cache, md.query_start_loc, md.seq_lens, md.block_tables,
                              max_query_len=1, max_seq_len=32, num_splits=2, block_n=16)
    torch.testing.assert_close(out, expected, atol=2e-5, rtol=2e-5)


def test_plan_splits_only_when_requests_cannot_fill_the_gpu():
    common = dict(num_kv_heads=8, group=4, head_dim=128, dtype=torch.bfloat16, num_sms=132)
    single = plan_launch(num_reqs=1, max_query_len=1, max_seq_len=4096, **common)
    assert single.num_splits > 1 and single.split_len * single.num_splits >= 4096
    assert single.split_len % single.block_n == 0 and single.split_len * (single.num_splits - 1) < 4096
    assert single.num_splits * 8 >= 132  # batch 1 x 8 kv heads fills every SM
    assert plan_launch(num_reqs=64, max_query_len=1, max_seq_len=4096, **common).num_splits == 1
    assert plan_launch(num_reqs=1, max_query_len=1, max_seq_len=100, **common).num_splits == 1  # too short
    verify = plan_launch(num_reqs=1, max_query_len=4, max_seq_len=4096, **common)
    assert verify.block_m == 16 and verify.num_q_blocks == 1  # 4 queries x 4 heads share one tile
    prefill = plan_launch(num_reqs=1, max_query_len=4096, max_seq_len=4096, **common)
    assert prefill.num_splits == 1 and prefill.block_m >= 64


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("shape", ["decode", "verify", "prefill", "mixed"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_gpu_shapes_match_reference(shape, dtype, head_dim):
    rng = random.Random(f"{shape}{dtype}{head_dim}")
    num_reqs = {"decode": 16, "verify": 8, "prefill": 3, "mixed": 6}[shape]
    num_query = {
        "decode": [1] * num_reqs,
        "verify": [4] * num_reqs,
        "prefill": [rng.randint(100, 400) for _ in range(num_reqs)],
        "mixed": [rng.choice([1, 4, rng.randint(20, 200)]) for _ in range(num_reqs)],
    }[shape]
    batch = random_paged_batch(num_query=num_query, num_context=[rng.randint(0, 2000) for _ in range(num_reqs)],
                               num_heads=32, num_kv_heads=8, head_dim=head_dim, block_size=16, dtype=dtype,
                               device="cuda", seed=rng.randint(0, 1000))
    check_against_reference(batch)
    if shape in ("decode", "verify"):
        check_against_reference(batch, num_splits=7)


@pytest.mark.gpu
@needs_cuda
def test_gpu_batch1_long_context_split_kv():
    batch = random_paged_batch(num_query=[1], num_context=[4095], num_heads=32, num_kv_heads=8, head_dim=128,
                               block_size=16, dtype=torch.bfloat16, device="cuda", seed=3)
    check_against_reference(batch)  # the heuristic splits this one
