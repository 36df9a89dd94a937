"""The flashinfer backend's wiring on CPU, with flashinfer replaced by a torch stand-in of its documented
semantics: one plan per forward on the right wrapper, outputs equal to the torch reference, fallbacks."""

from __future__ import annotations

import dataclasses
import random
import sys

import pytest
import torch

pytest.importorskip("triton")

from tests.support import fake_flashinfer  # noqa: E402

from specbench.attention import create_backend  # noqa: E402
from specbench.attention import flashinfer_backend  # noqa: E402
from specbench.attention.invariant_violation import InvariantViolation  # noqa: E402
from specbench.attention.metadata import build_metadata  # noqa: E402
from specbench.errors import SpecbenchError  # noqa: E402
from tests.support.kernel_testing import random_paged_batch  # noqa: E402
from specbench.kv.kv_cache import KVCache, KVCacheSpec  # noqa: E402

SHAPES = {  # num_query per request; every request also has some keys cached before this forward
    "decode": [1, 1, 1, 1],
    "verify": [4, 4, 4],
    "prefill": [9, 23],
    "mixed": [1, 4, 17, 1],
}


def torch_store_kv(k, v, k_cache, v_cache, slot_mapping):
    """The KV store's contract in torch (the Triton kernel itself is tested in tests/kernels)."""
    k_cache.view(-1, *k_cache.shape[2:]).index_copy_(0, slot_mapping, k.to(k_cache.dtype))
    v_cache.view(-1, *v_cache.shape[2:]).index_copy_(0, slot_mapping, v.to(v_cache.dtype))


@pytest.fixture
def backend(monkeypatch):
    monkeypatch.setitem(sys.modules, "flashinfer", fake_flashinfer.as_module())
    monkeypatch.setattr(flashinfer_backend, "_runs_on", lambda device: True)
    monkeypatch.setattr(flashinfer_backend, "WORKSPACE_BYTES", 1024)
    b = create_backend("flashinfer", check_invariants=True)
    b._store_kv = torch_store_kv
    return b


def cache_pair(batch, num_layers: int = 2) -> tuple[KVCache, KVCache]:
    num_blocks, block_size, num_kv_heads, head_dim = batch.k_cache.shape
    spec = KVCacheSpec(num_layers, num_kv_heads, head_dim, batch.k_cache.dtype)
    caches = tuple(KVCache(spec, num_blocks, block_size, batch.q.device) for _ in range(2))
    for cache in caches:
        for layer in range(num_layers):
            cache.k[layer].copy_(batch.k_cache)
            cache.v[layer].copy_(batch.v_cache)
    return caches


def relative_error(got: torch.Tensor, expected: torch.Tensor) -> float:
    return ((got.float() - expected.float()).norm() / expected.float().norm()).item()


def make_batch(shape: str, head_dim: int = 64, dtype=torch.bfloat16, seed: int = 0, heads: tuple[int, int] = (4, 2)):
    rng = random.Random(f"{shape}{seed}")
    num_query = SHAPES[shape]
    return random_paged_batch(num_query=num_query, num_context=[rng.randint(0, 30) for _ in num_query],
                              num_heads=heads[0], num_kv_heads=heads[1], head_dim=head_dim, block_size=4,
                              dtype=dtype, device="cpu", seed=seed)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_forward_matches_torch_reference_with_one_plan(backend, shape):
    batch = make_batch(shape)
    ref_cache, fi_cache = cache_pair(batch)
    reference = create_backend("torch")
    reference.begin_forward(batch.md, "test")
    backend.begin_forward(batch.md, "test")
    for layer in range(2):  # layers share the plan made at the first one
        expected = reference.forward(layer, batch.q, batch.k, batch.v, ref_cache, batch.md)
        got = backend.forward(layer, batch.q, batch.k, batch.v, fi_cache, batch.md)
        assert got.shape == expected.shape and got.dtype == expected.dtype
        assert relative_error(got, expected) < 1e-2
        assert torch.equal(fi_cache.k[layer], ref_cache.k[layer]) and torch.equal(fi_cache.v[layer], ref_cache.v[layer])
    used, unused = (backend._decode, backend._prefill) if shape == "decode" else (backend._prefill, backend._decode)
    assert len(used.plans) == 1 and not unused.plans
    plan = used.plans[0]
    assert plan["causal"] == (shape != "decode")  # decode: one query sees every key either way
    assert (plan["num_qo_heads"], plan["num_kv_heads"], plan["head_dim"], plan["page_size"]) == (4, 2, 64, 4)
    assert plan["q_data_type"] == plan["kv_data_type"] == torch.bfloat16


def test_every_forward_plans_again(backend):
    first, second = make_batch("verify", seed=1), make_batch("verify", seed=2)
    _, cache = cache_pair(first)
    for batch in (first, second, first):
        backend.begin_forward(batch.md, "test")
        backend.forward(0, batch.q, batch.k, batch.v, cache, batch.md)
        backend.forward(1, batch.q, batch.k, batch.v, cache, batch.md)
    plans = backend._prefill.plans
    assert len(plans) == 3
    assert plans[0] == plans[2] and plans[0]["kv_indices"] != plans[1]["kv_indices"]


@pytest.mark.parametrize("head_dim, dtype, heads", [(16, torch.bfloat16, (4, 2)), (64, torch.float32, (4, 2)),
                                                    (64, torch.bfloat16, (6, 1))])
def test_layers_flashinfer_does_not_take_go_to_the_fallback(backend, head_dim, dtype, heads):
    batch = make_batch("mixed", head_dim=head_dim, dtype=dtype, heads=heads)
    ref_cache, fi_cache = cache_pair(batch)
    backend._fallback = create_backend("torch")
    backend.begin_forward(batch.md, "test")
    got = backend.forward(0, batch.q, batch.k, batch.v, fi_cache, batch.md)
    expected = create_backend("torch").forward(0, batch.q, batch.k, batch.v, ref_cache, batch.md)
    assert torch.equal(got, expected)
    assert backend._prefill is None and backend._decode is None  # nothing was planned


def test_begin_forward_runs_the_debug_invariants(backend):
    stale = build_metadata(positions=[3], num_query=[1], seq_lens=[5], block_tables=[[0, 1]], block_size=4,
                           device=torch.device("cpu"))  # position 3 but 5 visible keys: the seed bug class
    with pytest.raises(InvariantViolation, match="INV-0"):
        backend.begin_forward(stale, "draft step 1")


def test_metadata_without_host_copies_is_refused(backend):
    md = dataclasses.replace(make_batch("decode").md, seq_lens_cpu=(), query_start_loc_cpu=(0,),
                             block_tables_cpu=(), positions_cpu=(), slot_mapping_cpu=())
    backend.check_invariants = False
    with pytest.raises(SpecbenchError, match="run it eagerly"):
        backend.begin_forward(md, "graph capture")


def test_cpu_metadata_is_refused_without_the_stand_in(monkeypatch):
    monkeypatch.setitem(sys.modules, "flashinfer", fake_flashinfer.as_module())
    with pytest.raises(SpecbenchError, match="runs on CUDA"):
        create_backend("flashinfer").begin_forward(make_batch("decode").md, "test")
