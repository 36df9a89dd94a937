"""A torch stand-in for the flashinfer paged wrappers, as their docs and kernels define them, for CPU tests.

It checks the plan contract the backend relies on (int32 host index tensors, NHD caches, dtypes and head counts
matching the planned ones) and attends with flashinfer's mask: causal = bottom-right aligned, query j of a
request with n queries and L keys sees keys [0, L - n + j].
"""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F

__version__ = "0.0-fake"


class _PagedWrapper:
    def __init__(self, float_workspace_buffer: torch.Tensor, kv_layout: str = "NHD") -> None:
        assert kv_layout == "NHD"
        self.workspace = float_workspace_buffer
        self.plans: list[dict] = []  # every plan's arguments, for the tests

    def _plan(self, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, num_qo_heads, num_kv_heads, head_dim,
              page_size, causal, q_data_type, kv_data_type) -> None:
        for t in (qo_indptr, kv_indptr, kv_indices, kv_last_page_len):
            assert t.dtype == torch.int32 and t.device.type == "cpu" and t.dim() == 1
        assert len(kv_indptr) == len(qo_indptr) == len(kv_last_page_len) + 1
        assert int(kv_indptr[-1]) == len(kv_indices)
        assert num_qo_heads % num_kv_heads == 0
        self.plans.append(dict(qo_indptr=qo_indptr.tolist(), kv_indptr=kv_indptr.tolist(),
                               kv_indices=kv_indices.tolist(), kv_last_page_len=kv_last_page_len.tolist(),
                               num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
                               page_size=page_size, causal=causal, q_data_type=q_data_type,
                               kv_data_type=kv_data_type))

    def run(self, q: torch.Tensor, paged_kv_cache: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        plan = self.plans[-1]
        k_cache, v_cache = paged_kv_cache  # [num_pages, page_size, num_kv_heads, head_dim]
        assert q.dtype == plan["q_data_type"] and k_cache.dtype == plan["kv_data_type"]
        assert k_cache.shape[1:] == (plan["page_size"], plan["num_kv_heads"], plan["head_dim"])
        assert q.shape[1:] == (plan["num_qo_heads"], plan["head_dim"])
        qo, kv, pages, last = plan["qo_indptr"], plan["kv_indptr"], plan["kv_indices"], plan["kv_last_page_len"]
        group = plan["num_qo_heads"] // plan["num_kv_heads"]
        out = torch.empty_like(q)
        for r in range(len(last)):
            own = pages[kv[r]:kv[r + 1]]
            kv_len = (len(own) - 1) * plan["page_size"] + last[r] if own else 0
            keys = k_cache[own].flatten(0, 1)[:kv_len].float().repeat_interleave(group, dim=1)
            values = v_cache[own].flatten(0, 1)[:kv_len].float().repeat_interleave(group, dim=1)
            queries = q[qo[r]:qo[r + 1]].float()  # [n, heads, head_dim]
            n = queries.shape[0]
            mask = torch.ones(n, kv_len, dtype=torch.bool)
            if plan["causal"]:
                mask = torch.arange(kv_len)[None, :] <= (kv_len - n + torch.arange(n))[:, None]
            att = F.scaled_dot_product_attention(queries.transpose(0, 1), keys.transpose(0, 1),
                                                 values.transpose(0, 1), attn_mask=mask)
            out[qo[r]:qo[r + 1]] = att.transpose(0, 1).to(q.dtype)
        return out


class BatchPrefillWithPagedKVCacheWrapper(_PagedWrapper):
    def plan(self, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads,
             num_kv_heads, head_dim_qk, page_size, causal=False, q_data_type="float16", kv_data_type=None):
        self._plan(qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads,
                   num_kv_heads, head_dim_qk, page_size, causal, q_data_type, kv_data_type or q_data_type)


class BatchDecodeWithPagedKVCacheWrapper(_PagedWrapper):
    def plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
             q_data_type="float16", kv_data_type=None):
        qo_indptr = torch.arange(len(last_page_len) + 1, dtype=torch.int32)  # one query per request
        self._plan(qo_indptr, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
                   False, q_data_type, kv_data_type or q_data_type)


def as_module() -> types.ModuleType:
    """A module object to put at sys.modules['flashinfer']."""
    module = types.ModuleType("flashinfer")
    module.__version__ = __version__
    module.BatchPrefillWithPagedKVCacheWrapper = BatchPrefillWithPagedKVCacheWrapper
    module.BatchDecodeWithPagedKVCacheWrapper = BatchDecodeWithPagedKVCacheWrapper
    return module
