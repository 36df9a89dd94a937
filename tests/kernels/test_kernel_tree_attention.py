"""Tree-masked paged attention: the Triton kernel == the torch reference; a chain mask == causal attention;
a mask that lets a node see its sibling changes the output (and the kernel honours it like the reference).

On CPU the kernel runs under TRITON_INTERPRET=1 with small shapes (see tests/conftest.py).
"""

from __future__ import annotations

import random

import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

pytestmark = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)

from specbench.kernels.tree_attention import pack_tree_mask, tree_attention

from specbench.attention.torch_ref import TorchPagedAttention
from specbench.attention.tree_torch_ref import tree_attention_reference
from specbench.kv.kv_cache import KVCache, KVCacheSpec
from specbench.speculation.tree.draft_tree import DraftTree, tree_from_parents, verify_attention_mask
from tests.support.kernel_testing import (
    PagedBatch,
    poisoned_allocations,
    random_paged_batch,
)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
TOLERANCE = {torch.float32: 2e-5, torch.float16: 3e-3, torch.bfloat16: 3e-2}


def random_parents(rng: random.Random, num_nodes: int) -> list[int]:
    return [rng.randint(-1, i - 1) for i in range(num_nodes)]


def stored_batch(tree: DraftTree, num_context: list[int], heads: int, kv_heads: int, head_dim: int,
                 block_size: int, dtype: torch.dtype, seed: int) -> PagedBatch:
    """A paged batch whose queries are each request's root + nodes, with this forward's K/V already stored."""
    batch = random_paged_batch(num_query=(tree.num_nodes + 1).tolist(), num_context=num_context, num_heads=heads,
                               num_kv_heads=kv_heads, head_dim=head_dim, block_size=block_size, dtype=dtype,
                               device=DEVICE, seed=seed)
    batch.k_cache.flatten(0, 1).index_copy_(0, batch.md.slot_mapping, batch.k)
    batch.v_cache.flatten(0, 1).index_copy_(0, batch.md.slot_mapping, batch.v)
    return batch


def run_both(batch: PagedBatch, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    md = batch.md
    expected = tree_attention_reference(batch.q, batch.k_cache, batch.v_cache, md.query_start_loc, md.seq_lens,
                                        md.block_tables, mask.to(batch.q.device))
    with poisoned_allocations():
        out = tree_attention(batch.q, batch.k_cache, batch.v_cache, md.query_start_loc, md.seq_lens, md.block_tables,
                             pack_tree_mask(mask.to(batch.q.device)), max_query_len=md.max_query_len, block_n=16)
    assert not out.isnan().any()
    return out, expected


def test_pack_tree_mask_bits():
    mask = torch.zeros(3, 40, dtype=torch.bool)
    mask[0, [0, 31]] = True
    mask[1, [1, 32, 39]] = True
    words = pack_tree_mask(mask)
    assert words.dtype == torch.int32 and words.shape == (3, 2)
    assert words[0].tolist() == [1 - 2**31, 0]  # bits 0 and 31: the sign bit
    assert words[1].tolist() == [2, 1 + 2**7]
    assert words[2].tolist() == [0, 0]


# (nodes per request, cached keys per request, heads, kv heads, head_dim, block_size, dtype)
CASES = {
    "small_fp32": ([5, 0, 3], [7, 19, 0], 4, 2, 16, 4, torch.float32),
    "wide_tree_two_mask_words_fp32": ([36, 2], [5, 11], 2, 1, 16, 8, torch.float32),
    "gqa4_fp16": ([7, 4], [13, 30], 8, 2, 32, 16, torch.float16),
    "bf16_odd_head_dim": ([6], [21], 6, 2, 24, 8, torch.bfloat16),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_kernel_matches_reference(case):
    nodes, num_context, heads, kv_heads, head_dim, block_size, dtype = CASES[case]
    rng = random.Random(case)
    parents = [random_parents(rng, n) for n in nodes]
    tree = tree_from_parents(parents, parents)
    batch = stored_batch(tree, num_context, heads, kv_heads, head_dim, block_size, dtype, seed=len(case))
    out, expected = run_both(batch, verify_attention_mask(tree))
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(out.float(), expected.float(), atol=tol, rtol=tol)


def test_chain_mask_is_causal_attention():
    """The reference on a chain tree equals the repo's causal paged attention reference."""
    parents = [[-1, 0, 1, 2], [-1, 0]]
    tree = tree_from_parents(parents, parents)
    batch = stored_batch(tree, [9, 3], 4, 2, 16, 4, torch.float32, seed=5)
    _, block_size, kv_heads, head_dim = batch.k_cache.shape
    cache = KVCache(KVCacheSpec(1, kv_heads, head_dim, torch.float32), 0, block_size, batch.q.device)
    cache.k[0], cache.v[0] = batch.k_cache.clone(), batch.v_cache.clone()
    causal = TorchPagedAttention().attend_stored(0, batch.q, cache, batch.md)
    out, expected = run_both(batch, verify_attention_mask(tree))
    torch.testing.assert_close(expected, causal, atol=2e-5, rtol=2e-5)
    torch.testing.assert_close(out, causal, atol=2e-5, rtol=2e-5)


def test_a_node_seeing_its_sibling_changes_the_output():
    """Mutant: the mask row of node 1 also lists node 0, its sibling (root -> 0, 1). The row's output moves well past
    the tolerance, the others stay; the kernel follows the bent mask exactly like the reference (it reads every bit)."""
    parents = [[-1, -1, 0]]
    tree = tree_from_parents(parents, parents)
    batch = stored_batch(tree, [6], 2, 1, 16, 4, torch.float32, seed=9)
    # Crafted: node 0's key is node 1's query, scaled, so seeing it dominates node 1's softmax.
    node0_slot = batch.md.slot_mapping[1]  # tokens: root, node 0, node 1, node 2
    batch.k_cache.flatten(0, 1)[node0_slot] = batch.q[2, :1] * 4.0
    good_mask = verify_attention_mask(tree)
    bent_mask = good_mask.clone()
    bent_mask[2, 1] = True  # request row 2 (node 1) sees row 1 (node 0)
    good_out, good_ref = run_both(batch, good_mask)
    bent_out, bent_ref = run_both(batch, bent_mask)
    torch.testing.assert_close(bent_out, bent_ref, atol=2e-5, rtol=2e-5)
    assert float((bent_ref[2] - good_ref[2]).abs().max()) > 0.1
    assert float((bent_out[2] - good_out[2]).abs().max()) > 0.1
    torch.testing.assert_close(bent_out[[0, 1, 3]], good_out[[0, 1, 3]])


def test_each_node_attends_exactly_along_its_branch():
    """One tree forward == running each root-to-node branch as its own causal chain: node i's output is attention
    over the cached prefix, the root and its path only (keys chosen here by walking parents, not by the mask)."""
    parents = [-1, -1, 0, 0, 1, 2, 5]
    tree = tree_from_parents([parents], [parents])
    num_context = 5
    batch = stored_batch(tree, [num_context], 4, 2, 16, 4, torch.float32, seed=13)
    out, _ = run_both(batch, verify_attention_mask(tree))
    block_size, group = batch.k_cache.shape[1], 2
    pos = torch.arange(num_context + 1 + len(parents))
    # the expected values on the host, whatever device the kernel ran on
    slots = batch.md.block_tables[0].long().cpu()[pos // block_size] * block_size + pos % block_size
    keys = batch.k_cache.cpu().flatten(0, 1)[slots].double().repeat_interleave(group, dim=1)  # [seq, heads, dim]
    values = batch.v_cache.cpu().flatten(0, 1)[slots].double().repeat_interleave(group, dim=1)
    for node in range(len(parents)):
        branch, n = [], node
        while n != -1:
            branch.append(num_context + 1 + n)
            n = parents[n]
        visible = list(range(num_context + 1)) + branch[::-1]  # prefix, root, path
        q = batch.q[1 + node].cpu().double()  # [heads, dim]
        scores = torch.einsum("hd,khd->hk", q, keys[visible]) / 4.0  # sqrt(head_dim)
        expected = torch.einsum("hk,khd->hd", scores.softmax(-1), values[visible])
        torch.testing.assert_close(out[1 + node].cpu().double(), expected, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_draft_step_layout_matches_reference(dtype):
    """A tree draft step: each request's queries are the last `num_query` of more tree rows (num_tree_rows), every
    query sees the prefix and the tree rows its mask lists (among them rows fed by earlier steps, never a later
    one). Kernel (num_tree_rows given) == reference; without num_tree_rows the kernel would read rows off by the
    earlier steps' count, so the outputs differ."""
    num_rows, num_query, num_context = [6, 4], [2, 2], [7, 3]
    batch = random_paged_batch(num_query=num_rows, num_context=num_context, num_heads=4, num_kv_heads=2, head_dim=16,
                               block_size=4, dtype=dtype, device=DEVICE, seed=21)
    batch.k_cache.flatten(0, 1).index_copy_(0, batch.md.slot_mapping, batch.k)
    batch.v_cache.flatten(0, 1).index_copy_(0, batch.md.slot_mapping, batch.v)
    cu = batch.md.query_start_loc_cpu
    rows = [t for r in range(2) for t in range(cu[r + 1] - num_query[r], cu[r + 1])]  # the last rows: the queries
    q = batch.q[rows].contiguous()
    query_start_loc = torch.tensor([0, 2, 4], dtype=torch.int32, device=DEVICE)
    gen = torch.Generator().manual_seed(3)
    mask = torch.zeros(4, max(num_rows), dtype=torch.bool)
    for r in range(2):
        for j in range(num_query[r]):
            row = num_rows[r] - num_query[r] + j
            mask[2 * r + j, :row] = torch.rand(row, generator=gen) < 0.5  # some earlier rows (ancestors)
            mask[2 * r + j, row] = True
    mask = mask.to(DEVICE)
    expected = tree_attention_reference(q, batch.k_cache, batch.v_cache, query_start_loc, batch.md.seq_lens,
                                        batch.md.block_tables, mask, num_tree_rows=tuple(num_rows))
    tree_rows = torch.tensor(num_rows, dtype=torch.int32, device=DEVICE)
    with poisoned_allocations():
        out = tree_attention(q, batch.k_cache, batch.v_cache, query_start_loc, batch.md.seq_lens,
                             batch.md.block_tables, pack_tree_mask(mask), max_query_len=2, block_n=16,
                             num_tree_rows=tree_rows)
        as_verify = tree_attention(q, batch.k_cache, batch.v_cache, query_start_loc, batch.md.seq_lens,
                                   batch.md.block_tables, pack_tree_mask(mask), max_query_len=2, block_n=16)
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(out.float(), expected.float(), atol=tol, rtol=tol)
    assert float((as_verify.float() - expected.float()).abs().max()) > 10 * tol
