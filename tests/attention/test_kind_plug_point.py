"""Attention kinds as a plug point, with two kinds declared only here and registered by these tests alone (no
production file names them):
- chunked local attention (Llama-4's `chunked_attention`: a query at p sees keys from p // c * c on), a key window:
  its HF layer type loads from a config, its builder runs for every forward (prefill, verify, the draft LM's catch-up
  and each draft step) and its own INV-KIND check on each, and the torch and Triton backends attend it as they are;
- a state kind (`test_state_attention`) that is no key window: a backend that does not name it is refused at model
  load with the kinds it implements; one that names it is accepted. (The production recurrent-state kind,
  `linear_attention`, runs no backend at all: attention/recurrent_kind.py.)
Unknown HF layer types fail with the supported list; FlashInfer's per-layer fallback follows its declaration."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch
from tests.support import fake_flashinfer
from tests.support.hf_greedy import tiny_prompt_ids
from tests.support.tiny_models import build_tiny_model
from tests.support.window_batches import window_batch

from specbench import LLM, SamplingParams
from specbench.attention import flashinfer_backend
from specbench.attention.backend import create_backend
from specbench.attention.invariant_violation import InvariantViolation
from specbench.attention.kind_metadata import KindMetadata
from specbench.attention.kinds import ATTENTION_KINDS, HF_LAYER_TYPES, FullAttention, SlidingWindowAttention
from specbench.attention.kinds import register_kind
from specbench.attention.layer_kinds import LayerKinds
from specbench.attention.metadata import AttentionMetadata
from specbench.attention.torch_ref import TorchPagedAttention, paged_attention_reference
from specbench.errors import SpecbenchError
from specbench.kv.kv_cache import KVCache, KVCacheSpec
from specbench.models import ModelConfig
from specbench.models.loader import load_model
from specbench.speculation.draft_shape import DraftShape

CHUNK = 4
BUILT: list[tuple[int, ...]] = []  # the positions of every forward the throwaway kind's builder ran for


@dataclass(frozen=True, slots=True)
class ChunkMetadata(KindMetadata):
    window_starts: torch.Tensor  # [num_tokens] int32, the first key of each query's chunk

    @property
    def sliding_window(self) -> int:  # no query sees more than one chunk
        return self.kind.chunk

    def key_window(self) -> ChunkMetadata:
        return self  # a window over the causal keys: every masking kernel attends it as is


@dataclass(frozen=True)
class ChunkedAttention:
    chunk: int
    name: ClassVar[str] = "test_chunked"
    hf_layer_types: ClassVar[tuple[str, ...]] = ("chunked_attention",)
    is_full: ClassVar[bool] = False
    is_key_window: ClassVar[bool] = True
    is_recurrent_state: ClassVar[bool] = False
    verifies_trees: ClassVar[bool] = False

    @classmethod
    def from_hf(cls, sliding_window: int) -> ChunkedAttention:
        return cls(sliding_window)

    @property
    def kv_window(self) -> int | None:
        return None

    def build(self, md: AttentionMetadata) -> KindMetadata:
        BUILT.append(md.positions_cpu)
        return ChunkMetadata(self, window_starts=(md.positions // self.chunk * self.chunk).to(md.seq_lens.dtype))

    def check(self, built: KindMetadata, md: AttentionMetadata, layer: int, where: str) -> None:
        expected = [p // self.chunk * self.chunk for p in _positions_from_lengths(md)]
        if built.window_starts.tolist() != expected:
            raise InvariantViolation(f"{where}: INV-KIND violated: layer {layer} chunk starts "
                                     f"{built.window_starts.tolist()}, expected {expected}")


@dataclass(frozen=True, slots=True)
class StateMetadata(KindMetadata):
    pass  # no key_window(): a masking kernel cannot attend it


@dataclass(frozen=True)
class StateKind:
    """Stands for a recurrent-state layer: no key window, so only a backend naming it (its own kernel) may run it."""

    name: ClassVar[str] = "test_state"
    hf_layer_types: ClassVar[tuple[str, ...]] = ("test_state_attention",)
    is_full: ClassVar[bool] = False
    is_key_window: ClassVar[bool] = False
    is_recurrent_state: ClassVar[bool] = False
    verifies_trees: ClassVar[bool] = False

    @classmethod
    def from_hf(cls, sliding_window: int) -> StateKind:
        return cls()

    @property
    def kv_window(self) -> int | None:
        return None

    def build(self, md: AttentionMetadata) -> KindMetadata:
        return StateMetadata(self)

    def check(self, built: KindMetadata, md: AttentionMetadata, layer: int, where: str) -> None:
        pass


def _positions_from_lengths(md: AttentionMetadata) -> list[int]:
    cu = md.query_start_loc_cpu
    return [md.seq_lens_cpu[r] - (cu[r + 1] - cu[r]) + j for r in range(md.num_reqs) for j in range(cu[r + 1] - cu[r])]


@pytest.fixture
def chunked(monkeypatch):
    """Both throwaway kinds registered for this test only: the registries are restored afterwards."""
    for registry in (ATTENTION_KINDS, HF_LAYER_TYPES):
        monkeypatch.setattr(registry, "_factories", dict(registry._factories))
    register_kind(ChunkedAttention)
    register_kind(StateKind)
    BUILT.clear()
    yield ChunkedAttention
    BUILT.clear()


def _tiny_target(root, layer_types: list[str]):
    """A tiny Mistral whose config lists `layer_types` (window 4 -> chunk 4)."""
    build_tiny_model(root, "mistral", num_layers=len(layer_types), seed=0, sliding_window=CHUNK)
    config = json.loads((root / "config.json").read_text())
    config["layer_types"] = layer_types
    (root / "config.json").write_text(json.dumps(config))
    return root


@pytest.fixture
def chunked_target(tmp_path):
    return _tiny_target(tmp_path, ["chunked_attention", "full_attention"])


def test_the_kind_loads_from_its_hf_layer_type_and_is_gone_after_the_test(chunked, chunked_target):
    kinds = ModelConfig.from_hf(json.loads((chunked_target / "config.json").read_text())).attention_kinds
    assert kinds == (ChunkedAttention(CHUNK), FullAttention())
    assert ATTENTION_KINDS.create("test_chunked", 2) == ChunkedAttention(2)


def test_no_production_registry_knows_the_throwaway_kinds():
    assert not {"test_chunked", "test_state"} & set(ATTENTION_KINDS.supported())
    assert not {"chunked_attention", "test_state_attention"} & set(HF_LAYER_TYPES.supported())


def test_a_backend_that_does_not_declare_the_kind_refuses_it_at_model_load(chunked, tmp_path):
    target = _tiny_target(tmp_path, ["full_attention", "test_state_attention", "chunked_attention",
                                     "test_state_attention"])
    message = ("attention backend 'torch' does not implement attention kind 'test_state' \\(layers 1, 3\\); "
               "it implements: full, gated_delta_net, mamba2, sliding_window, test_chunked")
    with pytest.raises(SpecbenchError, match=message):
        load_model(str(target), dtype=torch.float32, device="cpu", attn_backend="torch")
    kinds = LayerKinds.of((StateKind(), ChunkedAttention(2)), 2)
    with pytest.raises(SpecbenchError, match="does not implement attention kind 'test_state' \\(layers 0\\)"):
        kinds.require_backend(TorchPagedAttention())

    class StateBackend(TorchPagedAttention):
        supported_kinds = frozenset({StateKind.name})  # a kernel of its own for the state kind

    kinds.require_backend(StateBackend())


def test_its_metadata_is_built_for_every_forward_draft_steps_included(chunked, chunked_target, monkeypatch):
    # A key window: the torch backend attends it as it is (no declaration, no kernel).
    forwards: list[str] = []
    clean_begin = TorchPagedAttention.begin_forward

    def begin_forward(self, md: AttentionMetadata, where: str) -> None:
        chunk_md = md.kind_of(0)
        assert isinstance(chunk_md, ChunkMetadata), where
        assert chunk_md.window_starts.tolist() == [p // CHUNK * CHUNK for p in md.positions_cpu], where
        assert BUILT[-1] == md.positions_cpu, f"{where}: metadata not built for this forward"
        forwards.append(where)
        clean_begin(self, md, where)

    monkeypatch.setattr(TorchPagedAttention, "begin_forward", begin_forward)
    llm = LLM(str(chunked_target), dtype="fp32", device="cpu", block_size=4, max_concurrency=4, kv_cache_gb=0.25,
              debug_invariants=True, method="draft", draft=str(chunked_target), max_num_steps=3,
              attention_backend="torch")
    outs = llm.generate(tiny_prompt_ids()[:2], SamplingParams(max_tokens=6, ignore_eos=True))
    assert all(len(o.output_token_ids) == 6 for o in outs)
    assert {"prefill", "verify", "draft_extend", "draft_step_1", "draft_step_2"} <= set(forwards)
    assert len(BUILT) == len(forwards)  # one build per forward, for its own positions (checked above)


def test_tree_draft_steps_attach_their_kinds_like_every_other_forward(tmp_path, monkeypatch):
    """Every model forward, tree draft steps and tree verifies included, attaches its kinds right before the backend
    sees it (a full-attention pair: tree drafts need full-attention layers, so the attach is there but builds
    nothing)."""
    build_tiny_model(tmp_path, "llama", num_layers=2, seed=0)
    attached: list[str] = []
    begun: list[str] = []
    clean_attach, clean_begin = LayerKinds.attach, TorchPagedAttention.begin_forward

    def attach(self, md: AttentionMetadata, where: str) -> AttentionMetadata:
        attached.append(where)
        return clean_attach(self, md, where)

    def begin_forward(self, md: AttentionMetadata, where: str) -> None:
        begun.append(where)
        clean_begin(self, md, where)

    monkeypatch.setattr(LayerKinds, "attach", attach)
    monkeypatch.setattr(TorchPagedAttention, "begin_forward", begin_forward)
    llm = LLM(str(tmp_path), dtype="fp32", device="cpu", block_size=4, max_concurrency=4, kv_cache_gb=0.02,
              debug_invariants=True, method="draft", draft=str(tmp_path), max_num_steps=3, attention_backend="torch")
    llm.engine.set_draft_shape(DraftShape(2, 4))
    llm.generate(tiny_prompt_ids()[:2], SamplingParams(max_tokens=6, ignore_eos=True))
    assert "spec.tree_round" in llm.engine.paths_taken()
    assert any(w.startswith("draft_tree_step_") for w in attached), sorted(set(attached))
    assert attached == begun


def test_an_unknown_hf_layer_type_fails_with_the_supported_ones_even_without_a_window():
    base = {"vocab_size": 64, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2,
            "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 128,
            "architectures": ["MistralForCausalLM"], "model_type": "mistral",
            "layer_types": ["chunked_attention", "full_attention"]}
    message = ("unsupported attention layer type 'chunked_attention'; supported: full_attention, "
               "linear_attention, sliding_attention")
    for window in (8, None):  # no window used to turn every layer full attention before the types were read
        with pytest.raises(SpecbenchError, match=message):
            ModelConfig.from_hf({**base, "sliding_window": window})


def test_a_masking_kernel_refuses_a_kind_that_is_no_key_window():
    with pytest.raises(SpecbenchError, match="attention kind 'test_state' is not a window over the causal keys"):
        StateKind().build(None).key_window()


def test_flashinfer_hands_the_kinds_outside_its_own_to_its_declared_fallback(monkeypatch):
    monkeypatch.setitem(sys.modules, "flashinfer", fake_flashinfer.as_module())
    monkeypatch.setattr(flashinfer_backend, "_runs_on", lambda device: True)
    monkeypatch.setattr(flashinfer_backend, "WORKSPACE_BYTES", 1024)
    # the batch lives on the CPU: the torch fallback (on a GPU machine the real one would be Triton, on CUDA tensors)
    monkeypatch.setattr(flashinfer_backend, "_fallback_backend",
                        lambda check_invariants: TorchPagedAttention(check_invariants=check_invariants))
    backend = create_backend("flashinfer")
    assert flashinfer_backend.OWN_KINDS == {"full"} == backend.supported_kinds  # its fallback names none
    assert backend.attends_key_windows  # through its fallback
    b = window_batch(num_query=[9, 3, 1, 4], num_context=[0, 6, 20, 11], num_heads=4, num_kv_heads=2, head_dim=64,
                     block_size=4, dtype=torch.bfloat16, device="cpu")
    num_blocks, block_size, num_kv_heads, head_dim = b.k_cache.shape
    cache = KVCache(KVCacheSpec(2, num_kv_heads, head_dim, b.k_cache.dtype), num_blocks, block_size, "cpu")
    for layer in range(2):
        cache.k[layer].copy_(b.k_cache)
        cache.v[layer].copy_(b.v_cache)
    md = LayerKinds.of((SlidingWindowAttention(3), FullAttention()), 2).attach(b.md, "verify")
    backend.begin_forward(md, "verify")
    windowed = paged_attention_reference(b.q, *b.flat_caches(), b.md, sliding_window=3)
    full = paged_attention_reference(b.q, *b.flat_caches(), b.md)
    assert not torch.allclose(windowed.float(), full.float(), atol=1e-2)
    torch.testing.assert_close(backend.attend_stored(0, b.q, cache, md), windowed, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(backend.attend_stored(1, b.q, cache, md), full, atol=2e-2, rtol=2e-2)


def test_the_triton_backend_masks_with_any_key_window(chunked):
    """The Triton kernel needs nothing new for a kind that is a window over the causal keys: each layer's output equals
    the torch reference's (CPU: the interpreter; on CUDA the kernel itself)."""
    pytest.importorskip("triton")
    from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

    if not kernels_runnable_here():
        pytest.skip(RERUN_REASON)
    from specbench.attention.triton_backend import TritonPagedAttention

    device = "cuda" if torch.cuda.is_available() else "cpu"
    b = window_batch(num_query=[9, 3, 1, 4], num_context=[0, 6, 20, 11], num_heads=4, num_kv_heads=2, head_dim=32,
                     block_size=4, dtype=torch.float32, device=device)
    num_blocks, block_size, num_kv_heads, head_dim = b.k_cache.shape
    cache = KVCache(KVCacheSpec(3, num_kv_heads, head_dim, b.k_cache.dtype), num_blocks, block_size, device)
    for layer in range(3):
        cache.k[layer].copy_(b.k_cache)
        cache.v[layer].copy_(b.v_cache)
    kinds = LayerKinds.of((SlidingWindowAttention(3), ChunkedAttention(CHUNK), FullAttention()), 3)
    md = kinds.attach(b.md, "verify")
    triton_backend, reference = TritonPagedAttention(), TorchPagedAttention()
    kinds.require_backend(triton_backend)
    outs = [reference.attend_stored(layer, b.q, cache, md) for layer in range(3)]
    assert not torch.allclose(outs[1], outs[2], atol=1e-3)  # the chunk hides keys the full layer sees
    for layer in range(3):
        torch.testing.assert_close(triton_backend.attend_stored(layer, b.q, cache, md), outs[layer], atol=1e-4,
                                   rtol=1e-3)


def test_a_kind_that_leaves_a_flag_undeclared_fails_at_registration():
    from specbench.attention.kinds import register_kind

    @dataclass(frozen=True)
    class Undeclared:
        name: ClassVar[str] = "test_undeclared"
        hf_layer_types: ClassVar[tuple[str, ...]] = ()
        is_full: ClassVar[bool] = False
        is_key_window: ClassVar[bool] = True

    with pytest.raises(SpecbenchError, match="declares no is_recurrent_state, verifies_trees"):
        register_kind(Undeclared)
