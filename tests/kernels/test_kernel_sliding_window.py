"""Triton paged attention with a sliding window, attention sinks and soft-capping == the torch reference, over
ragged batches (prefill, extend, decode and verify; split-K and not). On CPU under TRITON_INTERPRET=1."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from specbench.kernels.attention_kernels import paged_attention_kernel
from specbench.kernels.paged_attention import paged_attention
from triton.runtime.interpreter import InterpretedFunction

from specbench.attention.torch_ref import paged_attention_reference
from tests.support.window_batches import (
    WindowBatch,
    expected_visible_average,
    position_revealing_batch,
    window_batch,
)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# Under pytest on CPU, tests/conftest.py sets TRITON_INTERPRET=1 before triton's first import; a session that
# imported triton earlier skips here, and test_kernel_subprocess.py reruns this directory in a fresh process.
pytestmark = pytest.mark.skipif(
    DEVICE == "cpu" and not isinstance(paged_attention_kernel, InterpretedFunction),
    reason="triton was imported before TRITON_INTERPRET=1 was set; test_kernel_subprocess.py reruns these")
TOLERANCE = {torch.float32: 2e-5, torch.float16: 3e-3, torch.bfloat16: 3e-2}
SINKS = {"big": 6.0, "small": -6.0, "mixed": None}


def run_triton(b: WindowBatch, **options) -> torch.Tensor:
    md = b.md
    return paged_attention(b.q, b.k_cache, b.v_cache, md.query_start_loc, md.seq_lens, md.block_tables,
                           max_query_len=md.max_query_len, max_seq_len=md.max_seq_len, **options)


def sinks_for(kind: str, num_heads: int) -> torch.Tensor:
    if SINKS[kind] is None:
        return torch.linspace(-4.0, 4.0, num_heads, device=DEVICE)
    return torch.full((num_heads,), SINKS[kind], device=DEVICE)


def check(b: WindowBatch, *, sliding_window=None, sinks=None, softcap=None, **launch) -> None:
    options = {"sliding_window": sliding_window, "sinks": sinks, "softcap": softcap}
    expected = paged_attention_reference(b.q, *b.flat_caches(), b.md, **options)
    out = run_triton(b, **options, **launch)
    tol = TOLERANCE[b.q.dtype]
    torch.testing.assert_close(out.float(), expected.float(), atol=tol, rtol=tol)


# (num_query, num_context, heads, kv_heads, block_size, dtype, window, launch overrides)
CASES = {
    "prefill_window_shorter_than_prompt": ([21, 3], [0, 5], 4, 2, 4, torch.float32, 5,
                                           {"block_m": 16, "block_n": 16}),
    "verify_window_cuts_between_queries": ([4, 4, 1], [9, 30, 12], 4, 2, 4, torch.float32, 2, {}),
    "verify_window_3_of_k_plus_1": ([4, 4], [0, 17], 4, 1, 8, torch.float32, 3, {"block_n": 16}),
    "window_1": ([5, 1, 3], [0, 19, 7], 4, 2, 4, torch.float32, 1, {}),
    "decode_split_k_window": ([1, 1, 1], [70, 40, 3], 4, 2, 4, torch.float32, 40, {"num_splits": 3, "block_n": 16}),
    "verify_split_k_window_bf16": ([4, 4], [60, 29], 8, 2, 16, torch.bfloat16, 33, {"num_splits": 2,
                                                                                      "block_n": 16}),
    "extend_fp16_window": ([6, 1, 4], [13, 30, 0], 6, 2, 8, torch.float16, 7, {"num_splits": 2}),
    "window_covers_everything": ([5, 1, 4], [3, 40, 10], 4, 2, 4, torch.float32, 1000, {"num_splits": 2,
                                                                                         "block_n": 16}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_window_matches_reference(case):
    num_query, num_context, heads, kv_heads, block_size, dtype, window, launch = CASES[case]
    b = window_batch(num_query=num_query, num_context=num_context, num_heads=heads, num_kv_heads=kv_heads,
                     head_dim=16, block_size=block_size, dtype=dtype, device=DEVICE, seed=len(case))
    check(b, sliding_window=window, **launch)


@pytest.mark.parametrize("num_splits", [1, 3])
@pytest.mark.parametrize("sinks", sorted(SINKS))
def test_sinks_match_reference_split_or_not(sinks, num_splits):
    """Split-K adds the sink once, in the merge; unsplit, at the end of the one program."""
    b = window_batch(num_query=[1, 4, 2], num_context=[50, 33, 0], num_heads=4, num_kv_heads=2, head_dim=16,
                     block_size=4, dtype=torch.float32, device=DEVICE, seed=11)
    for window in (None, 20):
        check(b, sliding_window=window, sinks=sinks_for(sinks, 4), num_splits=num_splits, block_n=16)


@pytest.mark.parametrize("num_splits", [1, 2])
def test_softcap_matches_reference(num_splits):
    b = window_batch(num_query=[3, 1, 5], num_context=[40, 21, 0], num_heads=4, num_kv_heads=2, head_dim=16,
                     block_size=4, dtype=torch.float32, device=DEVICE, seed=12)
    b = WindowBatch(md=b.md, q=b.q * 8, k_cache=b.k_cache, v_cache=b.v_cache)  # scores well past the cap
    for window in (None, 6):
        check(b, sliding_window=window, softcap=1.5, num_splits=num_splits, block_n=16)


def test_window_sinks_and_softcap_together_bf16():
    b = window_batch(num_query=[4, 1, 7], num_context=[45, 64, 2], num_heads=8, num_kv_heads=2, head_dim=32,
                     block_size=16, dtype=torch.bfloat16, device=DEVICE, seed=13)
    for num_splits in (1, 3):
        check(b, sliding_window=17, sinks=sinks_for("mixed", 8), softcap=5.0, num_splits=num_splits, block_n=16)


@pytest.mark.parametrize("num_splits", [1, 2])
def test_window_at_least_the_sequence_is_full_attention_bit_for_bit(num_splits):
    b = window_batch(num_query=[5, 1, 4], num_context=[3, 40, 10], num_heads=4, num_kv_heads=2, head_dim=16,
                     block_size=4, dtype=torch.float16, device=DEVICE, seed=14)
    full = run_triton(b, num_splits=num_splits, block_n=16)
    assert torch.equal(run_triton(b, sliding_window=b.md.max_seq_len, num_splits=num_splits, block_n=16), full)


@pytest.mark.parametrize("num_splits", [1, 2])
@pytest.mark.parametrize("window", [1, 3, 4, 9])
def test_each_query_sees_exactly_its_window(window, num_splits):
    """Crafted input whose output lists the key positions seen: a start off by one in the kernel shows up here."""
    b = position_revealing_batch(num_query=[4, 1, 6], num_context=[13, 26, 0], block_size=4, device=DEVICE)
    out = run_triton(b, sliding_window=window, num_splits=num_splits, block_n=16)
    expected = expected_visible_average(b, window).to(DEVICE)
    for head in range(out.shape[1]):
        torch.testing.assert_close(out[:, head], expected, atol=1e-6, rtol=0)
    shifted = expected_visible_average(b, window + 1).to(DEVICE)
    assert (out[:, 0] - shifted).abs().max() > 0.05  # the crafted input does tell the two windows apart


@pytest.mark.parametrize("num_splits", [1, 2])
def test_key_tiles_before_the_window_are_never_loaded(num_splits):
    """NaN values in every key tile wholly before each program's window: any load of them would poison p @ v."""
    num_context, window, block_n, block_size = [70, 55], 12, 16, 4
    b = window_batch(num_query=[1, 1], num_context=num_context, num_heads=4, num_kv_heads=2, head_dim=16,
                     block_size=block_size, dtype=torch.float32, device=DEVICE, seed=15)
    expected = paged_attention_reference(b.q, *b.flat_caches(), b.md, sliding_window=window)
    v_cache = b.v_cache.clone()
    for blocks, context in zip(b.md.block_tables_cpu, num_context):
        first_seen = context - window + 1
        first_loaded = first_seen - first_seen % block_n
        assert first_loaded >= 2 * block_n  # the test poisons something
        for pos in range(first_loaded):
            v_cache[blocks[pos // block_size], pos % block_size] = float("nan")
    poisoned = WindowBatch(md=b.md, q=b.q, k_cache=b.k_cache, v_cache=v_cache)
    out = run_triton(poisoned, sliding_window=window, num_splits=num_splits, block_n=block_n)
    torch.testing.assert_close(out, expected, atol=2e-5, rtol=2e-5)


def test_keys_past_a_stale_max_seq_len_are_still_attended_with_a_window():
    """A replayed CUDA graph keeps the split plan of its capture; the last split runs to each request's end."""
    b = window_batch(num_query=[1, 1], num_context=[90, 20], num_heads=4, num_kv_heads=2, head_dim=16,
                     block_size=4, dtype=torch.float32, device=DEVICE, seed=16)
    expected = paged_attention_reference(b.q, *b.flat_caches(), b.md, sliding_window=50,
                                         sinks=sinks_for("mixed", 4))
    md = b.md
    out = paged_attention(b.q, b.k_cache, b.v_cache, md.query_start_loc, md.seq_lens, md.block_tables,
                          max_query_len=1, max_seq_len=32, num_splits=2, block_n=16, sliding_window=50,
                          sinks=sinks_for("mixed", 4))
    torch.testing.assert_close(out, expected, atol=2e-5, rtol=2e-5)


def test_bad_options_are_refused():
    b = window_batch(num_query=[1], num_context=[3], num_heads=4, num_kv_heads=2, head_dim=16, block_size=4,
                     dtype=torch.float32, device=DEVICE)
    with pytest.raises(ValueError, match="sliding_window"):
        run_triton(b, sliding_window=0)
    with pytest.raises(ValueError, match="softcap"):
        run_triton(b, softcap=0.0)
    with pytest.raises(ValueError, match="sinks"):
        run_triton(b, sinks=torch.zeros(2, device=DEVICE))


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", ["decode", "verify", "prefill"])
def test_gpu_shapes_match_reference(shape, dtype):
    """Llama-8B-like heads, gpt-oss-like window 128 and sinks, Gemma-2-like cap; the heuristic's own splits."""
    num_reqs = {"decode": 16, "verify": 8, "prefill": 2}[shape]
    num_query = {"decode": [1] * num_reqs, "verify": [4] * num_reqs, "prefill": [300, 170]}[shape]
    gen = torch.Generator().manual_seed(len(shape))
    num_context = torch.randint(0, 2000, (num_reqs,), generator=gen).tolist()
    b = window_batch(num_query=num_query, num_context=num_context, num_heads=32, num_kv_heads=8, head_dim=128,
                     block_size=16, dtype=dtype, device="cuda", seed=len(shape))
    sinks = torch.linspace(-2.0, 6.0, 32, device="cuda")
    check(b, sliding_window=128)
    check(b, sliding_window=128, sinks=sinks)
    check(b, sliding_window=128, sinks=sinks, softcap=50.0)
    check(b, sliding_window=1000, sinks=sinks, num_splits=7)


def test_plan_splits_the_window_span_not_the_sequence():
    """Decode at 8k keys with a 128-key window reads ~128 keys: two 64-key tiles, too few to split."""
    from specbench.kernels.paged_attention import plan_launch

    common = {"num_kv_heads": 8, "group": 8, "head_dim": 64, "dtype": torch.bfloat16, "num_sms": 132}
    full = plan_launch(num_reqs=1, max_query_len=1, max_seq_len=8192, **common)
    windowed = plan_launch(num_reqs=1, max_query_len=1, max_seq_len=8192, sliding_window=128, **common)
    assert full.num_splits > 1 and windowed.num_splits == 1
    wide = plan_launch(num_reqs=1, max_query_len=4, max_seq_len=8192, sliding_window=4096, **common)
    assert wide.num_splits > 1 and wide.split_len * wide.num_splits < 4096 + 4 + wide.split_len
    assert plan_launch(num_reqs=1, max_query_len=1, max_seq_len=100, sliding_window=4096, **common) == plan_launch(
        num_reqs=1, max_query_len=1, max_seq_len=100, **common)  # a window longer than the keys changes nothing
