"""Paged attention through flashinfer (optional extra): Triton KV store, then flashinfer's paged decode/prefill.

One flashinfer plan per forward, made at its first layer (the plan needs head counts and dtypes, which the
metadata does not carry) and shared by every later layer of that forward.
"""

from __future__ import annotations

import torch

from specbench.attention.flashinfer_plan import PagedKVPlanInputs, paged_kv_plan_inputs
from specbench.attention.invariants import check_metadata
from specbench.attention.kinds import FullAttention
from specbench.attention.metadata import AttentionMetadata
from specbench.attention.score_params import PLAIN, ScoreParams
from specbench.errors import SpecbenchError
from specbench.kv.kv_cache import KVCache
from specbench.execution_paths import PathRecorder

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)
SUPPORTED_HEAD_DIMS = (64, 128, 256)
SUPPORTED_GROUP_SIZES = (1, 2, 3, 4, 8)  # query heads per KV head the decode kernel dispatches on
# Kinds flashinfer's own kernels attend; layers of the other kinds its fallback implements go to the fallback.
OWN_KINDS = frozenset({FullAttention.name})
WORKSPACE_BYTES = 128 * 2**20  # flashinfer's recommended split-KV scratch size, shared by both wrappers


def flashinfer_import_error() -> str | None:
    """None when flashinfer imports with the paged wrappers this backend uses, else the reason in one line."""
    try:
        import flashinfer
    except Exception as e:  # a broken install raises more than ImportError (missing CUDA libs, ABI mismatch)
        detail = str(e).splitlines()[0] if str(e) else ""
        return f"{type(e).__name__}: {detail}" if detail else type(e).__name__
    missing = [name for name in ("BatchPrefillWithPagedKVCacheWrapper", "BatchDecodeWithPagedKVCacheWrapper")
               if not hasattr(flashinfer, name)]
    return f"flashinfer {getattr(flashinfer, '__version__', '?')} lacks {', '.join(missing)}" if missing else None


def _runs_on(device: torch.device) -> bool:
    return device.type == "cuda"


def _takes(q: torch.Tensor, k_cache: torch.Tensor) -> bool:
    """Whether flashinfer's kernels cover this layer's dtypes and head shape."""
    num_heads, head_dim, num_kv_heads = q.shape[1], q.shape[2], k_cache.shape[2]
    return (q.dtype in SUPPORTED_DTYPES and k_cache.dtype in SUPPORTED_DTYPES and head_dim in SUPPORTED_HEAD_DIMS
            and num_heads % num_kv_heads == 0 and num_heads // num_kv_heads in SUPPORTED_GROUP_SIZES)


def _fallback_backend(check_invariants: bool):
    """Layers flashinfer does not take (fp32, other head dims or GQA groups) go through Triton, else the reference."""
    from specbench.attention.torch_ref import TorchPagedAttention

    try:
        from specbench.attention.triton_backend import TritonPagedAttention

        return TritonPagedAttention(check_invariants=check_invariants)
    except SpecbenchError:
        return TorchPagedAttention(check_invariants=check_invariants)


class FlashInferPagedAttention:
    name = "flashinfer"
    supports_cuda_graphs = False  # plans read host metadata every forward; the graph runner runs it eagerly

    def __init__(self, paths: PathRecorder | None = None, check_invariants: bool = False) -> None:
        self.paths = paths if paths is not None else PathRecorder()  # check_invariants: the engine's debug_invariants
        reason = flashinfer_import_error()
        if reason is not None:
            raise SpecbenchError(f"attention backend 'flashinfer' needs the flashinfer-python package ({reason})")
        import flashinfer

        from specbench.kernels.kv_store import store_kv

        self._flashinfer, self._store_kv = flashinfer, store_kv
        self._fallback = _fallback_backend(check_invariants)
        self.attends_key_windows = self._fallback.attends_key_windows
        self.supported_kinds = OWN_KINDS | self._fallback.supported_kinds
        self.check_invariants = check_invariants
        self._workspace: torch.Tensor | None = None  # [WORKSPACE_BYTES] uint8, on the metadata's device
        self._decode = self._prefill = None  # wrappers, built with the workspace
        # Each wrapper's plan fills a pinned host buffer and queues its copy to the device; the next plan of the
        # same wrapper may overwrite that buffer only once the copy ran (the host can be forwards ahead).
        self._plan_copied: dict[str, torch.cuda.Event] = {}
        self._md: AttentionMetadata | None = None  # the forward begin_forward prepared
        self._inputs: PagedKVPlanInputs | None = None
        self._planned: tuple | None = None  # (wrapper, shape key) planned for self._md

    def begin_forward(self, md: AttentionMetadata, where: str) -> None:
        self.paths.record("attention.flashinfer")
        if self.check_invariants:
            check_metadata(md, where)
        if not _runs_on(md.seq_lens.device):
            raise SpecbenchError(
                f"attention backend 'flashinfer' runs on CUDA, not {md.seq_lens.device.type}; "
                "use attention backend 'torch' there"
            )
        self._prepare(md)

    def _prepare(self, md: AttentionMetadata) -> None:
        if len(md.seq_lens_cpu) != md.seq_lens.shape[0]:
            raise SpecbenchError("attention backend 'flashinfer' plans from the metadata's host copies; "
                                 "this metadata has none (CUDA-graph buffers): run it eagerly")
        self._md = md
        self._inputs = paged_kv_plan_inputs(md, pin_memory=md.seq_lens.device.type == "cuda")
        self._planned = None

    def _wrappers(self, device: torch.device) -> None:
        fi = self._flashinfer
        self._workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        self._decode = fi.BatchDecodeWithPagedKVCacheWrapper(self._workspace, "NHD")
        self._prefill = fi.BatchPrefillWithPagedKVCacheWrapper(self._workspace, "NHD")

    def _plan(self, md: AttentionMetadata, q: torch.Tensor, k_cache: torch.Tensor):
        if md is not self._md:  # a forward whose caller skipped begin_forward
            self._prepare(md)
        num_kv_heads, head_dim = k_cache.shape[2], k_cache.shape[3]
        key = (q.shape[1], num_kv_heads, head_dim, q.dtype, k_cache.dtype, md.block_size)
        if self._planned is not None and self._planned[1] == key:
            return self._planned[0]
        if self._workspace is None or self._workspace.device != q.device:
            self._wrappers(q.device)
        inp = self._inputs
        kind = "decode" if inp.is_decode else "prefill"
        if kind in self._plan_copied:
            self._plan_copied[kind].synchronize()
        dtypes = dict(q_data_type=q.dtype, kv_data_type=k_cache.dtype)
        if inp.is_decode:
            wrapper = self._decode
            wrapper.plan(inp.kv_indptr, inp.kv_indices, inp.kv_last_page_len, q.shape[1], num_kv_heads, head_dim,
                         md.block_size, **dtypes)
        else:
            wrapper = self._prefill
            # causal=True masks bottom-right aligned: query j of a request with n queries and L keys sees keys
            # [0, L - n + j], exactly the metadata contract (decode, k+1-query verify and chunked prefill alike).
            wrapper.plan(inp.qo_indptr, inp.kv_indptr, inp.kv_indices, inp.kv_last_page_len, q.shape[1],
                         num_kv_heads, head_dim, md.block_size, causal=True, **dtypes)
        if q.device.type == "cuda":
            event = torch.cuda.Event()
            event.record()
            self._plan_copied[kind] = event
        self._planned = (wrapper, key)
        return wrapper

    def forward(
        self,
        layer: int,
        q: torch.Tensor,  # [num_tokens, num_heads, head_dim]
        k: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim]
        v: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim]
        kv_cache: KVCache,
        md: AttentionMetadata,
        score: ScoreParams = PLAIN,
    ) -> torch.Tensor:  # [num_tokens, num_heads, head_dim]
        k_cache, v_cache = kv_cache.k[layer], kv_cache.v[layer]
        if not _takes(q, k_cache):
            return self._fallback.forward(layer, q, k, v, kv_cache, md, score)
        self._store_kv(k, v, k_cache, v_cache, md.slot_mapping)
        return self.attend_stored(layer, q, kv_cache, md, score)

    def attend_stored(
        self,
        layer: int,
        q: torch.Tensor,  # [num_tokens, num_heads, head_dim]
        kv_cache: KVCache,
        md: AttentionMetadata,
        score: ScoreParams = PLAIN,
    ) -> torch.Tensor:  # [num_tokens, num_heads, head_dim]
        k_cache, v_cache = kv_cache.k[layer], kv_cache.v[layer]
        # Layers of kinds outside OWN_KINDS (attention/kinds.py: sliding windows) and layers with sinks, soft-capping
        # or their own scale go through the fallback's kernel, which implements them; tree forwards
        # (attention/tree_mask.py) through its tree kernel: no flashinfer custom mask yet.
        kind_md = md.kind_of(layer)
        is_own_kind = kind_md is None or kind_md.kind.name in OWN_KINDS
        if not _takes(q, k_cache) or not is_own_kind or not score.is_plain or md.tree is not None:
            return self._fallback.attend_stored(layer, q, kv_cache, md, score)
        if md.num_tokens == 0:
            return q.new_empty(q.shape)
        wrapper = self._plan(md, q, k_cache)
        return wrapper.run(q.contiguous(), (k_cache, v_cache))
