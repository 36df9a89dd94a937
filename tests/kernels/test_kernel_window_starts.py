"""The Triton kernel reads each query's window from the metadata (`window_starts`, built by the sliding-window kind)
and agrees with the torch reference reading the same starts; with starts shifted by one (a bad builder) both see the
shifted window, so the kernel cannot silently recompute a correct window the metadata does not say. CPU: interpreter."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

pytestmark = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)

from specbench.kernels.paged_attention import paged_attention
from tests.support.window_batches import expected_visible_average, position_revealing_batch, window_batch

from specbench.attention.kinds import SlidingWindowAttention
from specbench.attention.torch_ref import paged_attention_reference

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def run(b, window: int, starts: torch.Tensor, **launch) -> torch.Tensor:
    md = b.md
    return paged_attention(b.q, b.k_cache, b.v_cache, md.query_start_loc, md.seq_lens, md.block_tables,
                           max_query_len=md.max_query_len, max_seq_len=md.max_seq_len, sliding_window=window,
                           window_starts=starts, **launch)


@pytest.mark.parametrize("num_splits", [1, 3])
@pytest.mark.parametrize("window", [1, 3, 6])
def test_window_starts_match_the_window_size_path_and_the_reference(window, num_splits):
    b = window_batch(num_query=[4, 1, 9, 2], num_context=[13, 40, 0, 6], num_heads=4, num_kv_heads=2, head_dim=16,
                     block_size=4, dtype=torch.float32, device=DEVICE, seed=window)
    starts = SlidingWindowAttention(window).build(b.md).window_starts
    out = run(b, window, starts, num_splits=num_splits, block_n=16)
    by_size = paged_attention(b.q, b.k_cache, b.v_cache, b.md.query_start_loc, b.md.seq_lens, b.md.block_tables,
                              max_query_len=b.md.max_query_len, max_seq_len=b.md.max_seq_len, sliding_window=window,
                              num_splits=num_splits, block_n=16)
    torch.testing.assert_close(out, by_size, atol=2e-6, rtol=0)
    expected = paged_attention_reference(b.q, *b.flat_caches(), b.md, window_starts=starts)
    torch.testing.assert_close(out, expected, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("shift", [-1, 1])
def test_kernel_follows_shifted_starts(shift):
    b = position_revealing_batch(num_query=[4, 1, 6], num_context=[13, 26, 0], block_size=4, device=DEVICE)
    starts = (SlidingWindowAttention(4).build(b.md).window_starts + shift).clamp(min=0)
    out = run(b, 4, starts, num_splits=2, block_n=16)
    expected = paged_attention_reference(b.q, *b.flat_caches(), b.md, window_starts=starts)
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=0)
    assert not torch.allclose(out[:, 0], expected_visible_average(b, 4).to(DEVICE), atol=1e-3)


def test_window_starts_need_the_window_size():
    b = window_batch(num_query=[2], num_context=[3], num_heads=2, num_kv_heads=1, head_dim=16, block_size=4,
                     dtype=torch.float32, device=DEVICE)
    with pytest.raises(ValueError, match="window_starts needs the sliding_window"):
        run(b, None, SlidingWindowAttention(2).build(b.md).window_starts)
