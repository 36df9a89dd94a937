"""The flashinfer backend on a GPU with the real flashinfer (carried wheels: bash scripts/install_gpu_wheels.sh):
the torch reference's outputs for ragged bf16 decode / verify / prefill batches, the same KV cache contents, no
host sync in a forward, and engine greedy tokens close to the reference's. First use JIT-compiles (~1-2 min)."""

from __future__ import annotations

import random

import pytest
import torch

from specbench.attention.flashinfer_backend import flashinfer_import_error

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available() or flashinfer_import_error() is not None,
                       reason="needs a CUDA device and an importable flashinfer (scripts/install_gpu_wheels.sh)"),
]

from tests.support.gpu_report import record_gpu_result  # noqa: E402
from tests.support.tiny_models import build_tiny_model, derive_draft, gsm8k_questions, load_tiny_tokenizer  # noqa: E402

from specbench import LLM, SamplingParams  # noqa: E402
from specbench.attention import create_backend  # noqa: E402
from tests.support.kernel_testing import random_paged_batch  # noqa: E402
from specbench.kv.kv_cache import KVCache, KVCacheSpec  # noqa: E402


def cache_pair(batch, num_layers: int = 2) -> tuple[KVCache, KVCache]:
    num_blocks, block_size, num_kv_heads, head_dim = batch.k_cache.shape
    spec = KVCacheSpec(num_layers, num_kv_heads, head_dim, batch.k_cache.dtype)
    caches = tuple(KVCache(spec, num_blocks, block_size, batch.q.device) for _ in range(2))
    for cache in caches:
        for layer in range(num_layers):
            cache.k[layer].copy_(batch.k_cache)
            cache.v[layer].copy_(batch.v_cache)
    return caches


def ragged_batch(shape: str, seed: int):
    rng = random.Random(f"{shape}{seed}")
    num_reqs = {"decode": 16, "verify": 8, "prefill": 3, "mixed": 6}[shape]
    num_query = {
        "decode": [1] * num_reqs,
        "verify": [4] * num_reqs,  # k + 1 = 4
        "prefill": [rng.randint(100, 400) for _ in range(num_reqs)],
        "mixed": [rng.choice([1, 4, rng.randint(20, 200)]) for _ in range(num_reqs)],
    }[shape]
    return random_paged_batch(num_query=num_query, num_context=[rng.randint(0, 2000) for _ in range(num_reqs)],
                              num_heads=32, num_kv_heads=8, head_dim=128, block_size=16, dtype=torch.bfloat16,
                              device="cuda", seed=seed)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("shape", ["decode", "verify", "prefill", "mixed"])
def test_gpu_matches_torch_reference(shape, seed):
    batch = ragged_batch(shape, seed)
    ref_cache, fi_cache = cache_pair(batch)
    reference, flashinfer = create_backend("torch"), create_backend("flashinfer")
    reference.begin_forward(batch.md, "test")
    flashinfer.begin_forward(batch.md, "test")
    for layer in range(2):  # the second layer runs on the first one's plan
        expected = reference.forward(layer, batch.q, batch.k, batch.v, ref_cache, batch.md)
        got = flashinfer.forward(layer, batch.q, batch.k, batch.v, fi_cache, batch.md)
        assert got.shape == expected.shape and got.dtype == torch.bfloat16
        error = ((got.float() - expected.float()).norm() / expected.float().norm()).item()
        assert error < 1e-2, (shape, layer, error)
        assert torch.equal(fi_cache.k[layer], ref_cache.k[layer]) and torch.equal(fi_cache.v[layer], ref_cache.v[layer])


def test_gpu_forward_never_syncs_the_host():
    decode, verify = ragged_batch("decode", 3), ragged_batch("verify", 3)
    backend = create_backend("flashinfer")
    caches = {id(b): cache_pair(b, num_layers=1)[0] for b in (decode, verify)}
    for batch in (decode, verify):  # JIT and first plans outside the checked region
        backend.begin_forward(batch.md, "test")
        backend.forward(0, batch.q, batch.k, batch.v, caches[id(batch)], batch.md)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for batch in (decode, verify, decode):
            backend.begin_forward(batch.md, "test")
            backend.forward(0, batch.q, batch.k, batch.v, caches[id(batch)], batch.md)
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.fixture(scope="module")
def head_dim_128_model(tmp_path_factory):
    """Tiny Llama whose heads are 128 wide (flashinfer takes 64/128/256; the suite's tiny model has 16)."""
    target = tmp_path_factory.mktemp("tiny_hd128")
    build_tiny_model(target, hidden=512, heads=4, kv_heads=2, seed=5)
    draft = derive_draft(target, tmp_path_factory.mktemp("tiny_hd128_draft"), noise=0.1, seed=6)
    return str(target), str(draft)


@pytest.mark.parametrize("method", ["none", "draft"])
def test_gpu_engine_greedy_tokens_close_to_torch_backend(head_dim_128_model, method):
    target, draft = head_dim_128_model
    tok = load_tiny_tokenizer()
    prompts = [tok(q)["input_ids"][:n] for q, n in zip(gsm8k_questions("test")[:4], [7, 20, 13, 30])]
    kwargs = dict(method="draft", draft=draft, max_num_steps=3) if method == "draft" else {}
    outputs = {}
    for backend in ("torch", "flashinfer"):
        llm = LLM(target, dtype="bf16", device="cuda", block_size=16, max_concurrency=4, num_kv_blocks=128,
                  attention_backend=backend, **kwargs)
        assert llm.engine.parts.attention_backend == backend  # flashinfer was not silently replaced
        outs = llm.generate(prompts, SamplingParams(max_tokens=40, ignore_eos=True))
        outputs[backend] = [list(o.output_token_ids) for o in outs]
    same = sum(a == b for x, y in zip(outputs["flashinfer"], outputs["torch"]) for a, b in zip(x, y))
    rate = same / sum(len(x) for x in outputs["torch"])
    record_gpu_result(f"flashinfer_vs_torch_backend_{method}_bf16", rate)
    assert rate > 0.5, rate  # bf16 kernels round differently: catch gross breakage, report the agreement
