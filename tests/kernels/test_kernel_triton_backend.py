"""The "triton" attention backend: same outputs as the torch backend, same invariants, and the same greedy
tokens from the engine end to end (prefill, draft steps and verify all run through it)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here, random_paged_batch  # noqa: E402

pytestmark = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)

from tests.support.gpu_report import record_gpu_result  # noqa: E402
from tests.support.tiny_models import gsm8k_questions, load_tiny_tokenizer  # noqa: E402

from specbench import LLM, SamplingParams  # noqa: E402
from specbench.attention import build_metadata, create_backend  # noqa: E402
from specbench.attention.invariant_violation import InvariantViolation  # noqa: E402
from specbench.kv.kv_cache import KVCache, KVCacheSpec  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def paged_cache_pair(batch, num_layers: int = 2) -> tuple[KVCache, KVCache]:
    """Two identical multi-layer caches holding the batch's random cache contents in every layer."""
    num_blocks, block_size, num_kv_heads, head_dim = batch.k_cache.shape
    spec = KVCacheSpec(num_layers, num_kv_heads, head_dim, batch.k_cache.dtype)
    caches = (KVCache(spec, num_blocks, block_size, batch.q.device), KVCache(spec, num_blocks, block_size,
                                                                               batch.q.device))
    for cache in caches:
        for layer in range(num_layers):
            cache.k[layer].copy_(batch.k_cache)
            cache.v[layer].copy_(batch.v_cache)
    return caches


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])  # float64: the documented torch fallback
def test_backend_matches_torch_backend(dtype):
    batch = random_paged_batch(num_query=[6, 1, 4], num_context=[0, 21, 9], num_heads=4, num_kv_heads=2,
                               head_dim=16, block_size=4, dtype=dtype, device=DEVICE, seed=4)
    torch_cache, triton_cache = paged_cache_pair(batch)
    reference, triton = create_backend("torch"), create_backend("triton")
    assert triton.name == "triton"
    for backend in (reference, triton):
        backend.begin_forward(batch.md, "test")
    expected = reference.forward(1, batch.q, batch.k, batch.v, torch_cache, batch.md)
    got = triton.forward(1, batch.q, batch.k, batch.v, triton_cache, batch.md)
    torch.testing.assert_close(got, expected, atol=2e-5, rtol=2e-5)
    assert torch.equal(triton_cache.k[1], torch_cache.k[1]) and torch.equal(triton_cache.v[1], torch_cache.v[1])
    assert torch.equal(triton_cache.k[0], torch_cache.k[0])  # other layers untouched


def test_begin_forward_runs_the_debug_invariants():
    stale = build_metadata(positions=[3], num_query=[1], seq_lens=[5], block_tables=[[0, 1]], block_size=4,
                           device=torch.device(DEVICE))  # position 3 but 5 visible keys: the seed bug class
    with pytest.raises(InvariantViolation, match="INV-0"):
        create_backend("triton", check_invariants=True).begin_forward(stale, "draft step 1")
    create_backend("triton").begin_forward(stale, "draft step 1")  # off unless the engine asks for them


def run_engine(target: str, prompts, backend: str, dtype: str, max_tokens: int = 10, **kwargs) -> list[list[int]]:
    # A small pool: the CPU interpreter copies every tensor argument (the whole cache) on each launch.
    llm = LLM(target, dtype=dtype, device=DEVICE, block_size=4, max_concurrency=4, num_kv_blocks=64,
              attention_backend=backend, **kwargs)
    outs = llm.generate(prompts, SamplingParams(max_tokens=max_tokens, ignore_eos=True))
    return [list(o.output_token_ids) for o in outs]


@pytest.fixture(scope="module")
def prompts() -> list[list[int]]:
    tok = load_tiny_tokenizer()
    return [tok(q)["input_ids"][:n] for q, n in zip(gsm8k_questions("test")[:4], [7, 20, 13, 30])]


def test_engine_greedy_tokens_match_torch_backend(tiny_model_dir, tiny_draft_dir, prompts):
    """fp32 draft-model speculation: prefill, decode-shaped draft steps and k+1-query verify through Triton."""
    kwargs = dict(method="draft", draft=str(tiny_draft_dir), max_num_steps=2)
    expected = run_engine(str(tiny_model_dir), prompts[:2], "torch", "fp32", **kwargs)
    got = run_engine(str(tiny_model_dir), prompts[:2], "triton", "fp32", **kwargs)
    assert got == expected


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("method", ["none", "draft"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_gpu_engine_greedy_tokens_match_torch_backend(tiny_model_dir, tiny_draft_dir, prompts, dtype, method):
    kwargs = dict(method="draft", draft=str(tiny_draft_dir), max_num_steps=3) if method == "draft" else {}
    expected = run_engine(str(tiny_model_dir), prompts, "torch", dtype, max_tokens=40, **kwargs)
    got = run_engine(str(tiny_model_dir), prompts, "triton", dtype, max_tokens=40, **kwargs)
    if dtype == "fp32":
        assert got == expected
    else:  # bf16 attention rounds differently from SDPA: report the agreement, catch only gross breakage
        same = sum(a == b for x, y in zip(got, expected) for a, b in zip(x, y))
        rate = same / sum(len(x) for x in expected)
        record_gpu_result(f"triton_vs_torch_backend_{method}_bf16", rate)
        assert rate > 0.5, rate


@pytest.mark.gpu
@needs_cuda
def test_gpu_forward_never_syncs_the_host(monkeypatch):
    # Production mode: the debug invariants read device tensors back by design (INV-FIELDS), and are off here.
    batch = random_paged_batch(num_query=[1] * 8 + [4] * 4 + [40], num_context=[500] * 13, num_heads=32,
                               num_kv_heads=8, head_dim=128, block_size=16, dtype=torch.bfloat16, device="cuda")
    cache, _ = paged_cache_pair(batch, num_layers=1)
    backend = create_backend("triton")
    backend.begin_forward(batch.md, "test")
    backend.forward(0, batch.q, batch.k, batch.v, cache, batch.md)  # compile outside the checked region
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        backend.begin_forward(batch.md, "test")
        backend.forward(0, batch.q, batch.k, batch.v, cache, batch.md)
    finally:
        torch.cuda.set_sync_debug_mode("default")
