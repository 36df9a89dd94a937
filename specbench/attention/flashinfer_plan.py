"""AttentionMetadata -> flashinfer's paged-KV plan inputs (indptr / indices / last-page lengths), host side only.

flashinfer sees request r's keys as pages kv_indices[kv_indptr[r]:kv_indptr[r+1]], all full except the last,
which holds kv_last_page_len[r] keys: (num_pages - 1) * page_size + last_page_len == seq_lens[r].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.attention.metadata import AttentionMetadata


@dataclass(frozen=True, slots=True)
class PagedKVPlanInputs:
    qo_indptr: torch.Tensor  # [num_reqs + 1] int32 CPU, cu_num_query_tokens
    kv_indptr: torch.Tensor  # [num_reqs + 1] int32 CPU, cu_num_pages
    kv_indices: torch.Tensor  # [kv_indptr[-1]] int32 CPU, each request's pages in key order
    kv_last_page_len: torch.Tensor  # [num_reqs] int32 CPU, keys in the last page: 1..page_size (0: no keys)
    is_decode: bool  # every request has exactly one query token (flashinfer's decode wrapper applies)


def paged_kv_plan_inputs(md: AttentionMetadata, pin_memory: bool = False) -> PagedKVPlanInputs:
    """Reads only md's host tuples, so building a plan never waits on the device.

    Block-table entries past the pages a request's seq_len needs are left out: flashinfer counts keys from the
    page list, so a longer list would make queries see keys that are not written yet.
    """
    block_size = md.block_size
    kv_indptr, kv_indices, kv_last_page_len = [0], [], []
    for table, seq_len in zip(md.block_tables_cpu, md.seq_lens_cpu):
        num_pages = -(-seq_len // block_size)
        kv_indices.extend(table[:num_pages])
        kv_indptr.append(len(kv_indices))
        kv_last_page_len.append(seq_len - (num_pages - 1) * block_size if num_pages else 0)

    def host(values) -> torch.Tensor:
        t = torch.tensor(values, dtype=torch.int32)
        return t.pin_memory() if pin_memory else t

    cu = md.query_start_loc_cpu
    return PagedKVPlanInputs(
        qo_indptr=host(cu),
        kv_indptr=host(kv_indptr),
        kv_indices=host(kv_indices),
        kv_last_page_len=host(kv_last_page_len),
        is_decode=md.num_reqs > 0 and md.num_tokens == md.num_reqs and md.max_query_len == 1,
    )
