"""The tree verify input laid out on the device (engine/tree_inputs.build_uniform_tree_verify_input) against the host
layout (build_tree_verify_input, from the tree's host copy): the same tokens, positions, slots, counts and mask on
random uniform trees; the device tree and its padded form equal the host-built ones; with read_back the host
copies pass INV-TREE and a malformed tree is refused; on CUDA nothing synchronizes without read_back."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from specbench.attention.invariants import check_metadata
from specbench.attention.tree_mask import check_tree_positions_and_slots
from specbench.engine.tree_inputs import build_tree_verify_input, build_uniform_tree_verify_input, is_uniform
from specbench.speculation.proposer import DraftProposal
from specbench.speculation.tree.draft_tree import TreeShapeError, tree_from_parents
from specbench.speculation.tree.padded import pad_tree

DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                                              reason="needs a CUDA device")])]
BLOCK_SIZE = 4


def _case(seed: int, device: str, num_reqs: int = 5, num_nodes: int = 8):
    """Uniform random trees (any parent before its node), ragged prefixes, shuffled disjoint block tables."""
    gen = torch.Generator().manual_seed(seed)
    parents = [[int(torch.randint(-1, i, (), generator=gen)) for i in range(num_nodes)] for _ in range(num_reqs)]
    tokens = torch.randint(0, 50, (num_reqs, num_nodes), generator=gen)
    cached = torch.randint(0, 13, (num_reqs,), generator=gen).tolist()
    num_blocks = -(-(max(cached) + 1 + num_nodes) // BLOCK_SIZE)
    order = torch.randperm(num_reqs * num_blocks, generator=gen).view(num_reqs, num_blocks).tolist()
    requests = tuple(SimpleNamespace(num_cached_tokens=c, output_token_ids=[100 + r] if r % 2 else [],
                                     prompt_token_ids=[7, 200 + r], block_table=order[r])
                     for r, c in enumerate(cached))
    proposal = DraftProposal(tokens.to(device), (num_nodes,) * num_reqs, None, torch.tensor(parents).to(device))
    return requests, proposal, parents, tokens


@pytest.mark.parametrize("device", DEVICES)
def test_device_layout_equals_the_host_layout(device):
    for seed in range(12):
        requests, proposal, parents, tokens = _case(seed, device, num_nodes=1 + seed % 9)
        assert is_uniform(proposal)
        host_tree = tree_from_parents(tokens.tolist(), parents, device)
        want = build_tree_verify_input(requests, proposal, host_tree, BLOCK_SIZE, torch.device(device))
        got = build_uniform_tree_verify_input(requests, proposal, BLOCK_SIZE, torch.device(device))
        assert got.inp.input_ids.tolist() == want.input_ids.tolist()
        for field in ("positions", "slot_mapping", "query_start_loc", "seq_lens", "block_tables"):
            assert torch.equal(getattr(got.inp.md, field).cpu(), getattr(want.md, field).cpu()), field
        assert torch.equal(got.inp.md.tree.mask.cpu(), want.md.tree.mask.cpu())
        assert got.inp.md.tree.num_tree_rows == want.md.tree.num_tree_rows and got.inp.md.tree.is_verify
        assert (got.inp.md.max_query_len, got.inp.md.max_seq_len) == (want.md.max_query_len, want.md.max_seq_len)
        for field in ("token_ids", "parent", "depth", "num_nodes", "cu_num_nodes"):
            assert torch.equal(getattr(got.tree, field).cpu(), getattr(host_tree, field).cpu()), field
        want_padded = pad_tree(host_tree, proposal.num_draft_tokens[0])
        for field in ("token_ids", "parent", "depth", "is_node", "is_earlier_sibling", "rank", "is_ancestor",
                      "first_row"):
            assert torch.equal(getattr(got.padded, field).cpu(), getattr(want_padded, field).cpu()), field
        # no host copies of what the device derived, unless asked (debug invariants)
        assert got.inp.md.positions_cpu == () and got.inp.md.tree.mask_cpu.shape[0] == 0


def test_read_back_gives_checked_host_copies_and_refuses_a_malformed_tree():
    requests, proposal, parents, _ = _case(3, "cpu")
    got = build_uniform_tree_verify_input(requests, proposal, BLOCK_SIZE, torch.device("cpu"), read_back=True)
    md = got.inp.md
    assert list(md.positions_cpu) == md.positions.tolist() and torch.equal(md.tree.mask_cpu, md.tree.mask)
    check_metadata(md, "tree verify")
    check_tree_positions_and_slots(md, "tree verify")
    bad = [row[:] for row in parents]
    bad[1][2] = 5  # a parent after its child: the depths derived on the device would be wrong
    malformed = DraftProposal(proposal.draft_token_ids, proposal.num_draft_tokens, None, torch.tensor(bad))
    with pytest.raises(TreeShapeError, match="request 1: node 2 has parent 5"):
        build_uniform_tree_verify_input(requests, malformed, BLOCK_SIZE, torch.device("cpu"), read_back=True)


def test_ragged_proposals_are_not_uniform():
    requests, proposal, _, _ = _case(0, "cpu", num_reqs=2)
    assert not is_uniform(DraftProposal(proposal.draft_token_ids, (8, 5), None, proposal.parents))
    assert not is_uniform(DraftProposal(proposal.draft_token_ids[:, :0], (0, 0), None, proposal.parents[:, :0]))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_device_layout_launches_no_sync():
    requests, proposal, _, _ = _case(1, "cuda", num_reqs=16)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        layout = build_uniform_tree_verify_input(requests, proposal, BLOCK_SIZE, torch.device("cuda"))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert layout.inp.input_ids.shape[0] == 16 * 9
