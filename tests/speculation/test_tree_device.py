"""The device tree draft (speculation/tree/device.py) against the host reference (tree.propose.grow_tree): from the
same draft scores, identical trees, parent rows, fed rows and per-step metadata (positions, slots, key counts, tree
mask), with no host work per node; finish_on_device against finish."""

from __future__ import annotations

import pytest
import torch

from specbench.speculation.draft_records import DraftRecorder
from specbench.speculation.tree.builder import TopKTreeBuilder
from specbench.speculation.tree.device import block_table_tensor, grow_tree_on_device
from specbench.speculation.tree.step import StepLayout
from specbench.speculation.tree.plan import TreePlan
from specbench.speculation.tree.propose import grow_tree_reference
from specbench.speculation.tree.records import TreeRoundTrace

VOCAB = 11
BLOCK_SIZE = 4
PREFIX_LENS = (5, 9, 2)
BLOCK_TABLES = ((3, 7, 1, 8, 12, 15, 16), (0, 2, 4, 5, 6, 9, 17, 18), (10, 11, 13, 14, 19, 20))


def scored_step(log_records: list):
    """A fake drafter whose log-probs depend on every input a step reads (tokens, parent rows, positions, slots, key
    counts, mask): two paths that differ in any of them grow different trees. Records what each step was fed."""

    def run_step(step):
        md, frontier = step.md, step.frontier
        num_reqs, num_frontier = frontier.token_ids.shape
        mask = md.tree.mask.long()  # [R * F, rows]
        features = (frontier.token_ids.reshape(-1) * 7 + md.positions * 3 + md.slot_mapping * 5
                    + md.seq_lens.long().repeat_interleave(num_frontier)
                    + (mask * torch.arange(1, mask.shape[1] + 1)).sum(-1) * 11
                    + step.parent_row.reshape(-1) * 13)
        log_records.append((step.step, step.first_row, md.positions.tolist(), md.slot_mapping.tolist(),
                            md.seq_lens.tolist(), md.tree.mask.tolist(), md.tree.num_tree_rows, md.tree.is_verify,
                            step.parent_row.tolist(), md.query_start_loc.tolist()))
        logits = torch.sin(features[:, None].double() * torch.arange(1, VOCAB + 1, dtype=torch.float64) * 0.37)
        return torch.log_softmax(logits.float(), dim=-1).view(num_reqs, num_frontier, VOCAB)

    return run_step


def layout() -> StepLayout:
    return StepLayout(torch.tensor(PREFIX_LENS), block_table_tensor(BLOCK_TABLES, torch.device("cpu")), BLOCK_SIZE,
                      max(PREFIX_LENS) + 16, prefix_lens=PREFIX_LENS, read_back=True)


@pytest.mark.parametrize(("topk", "depth", "budget"), [(1, 4, 4), (2, 3, 5), (3, 4, 9), (4, 5, 8), (4, 1, 3)])
def test_device_tree_equals_host_reference(topk, depth, budget):
    plan = TreePlan(topk, depth, budget)
    root = torch.log_softmax(torch.cos(torch.arange(len(PREFIX_LENS) * VOCAB).view(-1, VOCAB) * 1.3), dim=-1)
    host_log, device_log = [], []
    want = grow_tree_reference(plan, root, layout(), scored_step(host_log))
    got = grow_tree_on_device(plan, root, layout(), scored_step(device_log))
    assert got.token_ids.tolist() == want.token_ids.tolist()
    assert got.parent.tolist() == want.parent.tolist()
    assert got.fed_row.tolist() == want.fed_row.tolist()
    assert device_log == host_log and len(host_log) == depth - 1
    assert (want.fed_row >= 0).any() == (depth > 1)  # fed nodes' KV is reusable
    if budget > (depth - 1) * topk:  # more nodes kept than rows fed: some were never fed
        assert (want.fed_row < 0).any()


def test_device_step_metadata_carries_device_values_and_host_counts():
    """Without read_back the eager metadata holds only what the host knows without a sync; with it, the device's."""
    plan = TreePlan(2, 3, 6)
    root = torch.log_softmax(torch.randn(len(PREFIX_LENS), VOCAB, generator=torch.Generator().manual_seed(0)), -1)
    seen = []

    def run_step(step):
        seen.append(step.md)
        return torch.log_softmax(torch.randn(*step.frontier.token_ids.shape, VOCAB,
                                             generator=torch.Generator().manual_seed(step.step)), -1)

    quiet = StepLayout(torch.tensor(PREFIX_LENS), block_table_tensor(BLOCK_TABLES, torch.device("cpu")), BLOCK_SIZE,
                       64, prefix_lens=PREFIX_LENS)
    grow_tree_on_device(plan, root, quiet, run_step)
    md = seen[-1]
    assert md.positions_cpu == () and md.tree.mask_cpu.shape[0] == 0
    assert md.seq_lens_cpu == tuple(p + 4 for p in PREFIX_LENS) and md.query_start_loc_cpu == (0, 2, 4, 6)
    assert md.positions.tolist() == [p + 1 for p in PREFIX_LENS for _ in range(2)]


def test_padding_requests_write_nothing():
    plan = TreePlan(2, 3, 6)
    is_real = torch.tensor([True, False, True])
    padded = StepLayout(torch.tensor(PREFIX_LENS), block_table_tensor(BLOCK_TABLES, torch.device("cpu")), BLOCK_SIZE,
                        64, is_real=is_real)
    slots = []

    def run_step(step):
        slots.append(step.md.slot_mapping.view(3, -1))
        return torch.log_softmax(torch.ones(*step.frontier.token_ids.shape, VOCAB), -1)

    grow_tree_on_device(plan, torch.zeros(3, VOCAB), padded, run_step)
    for step_slots in slots:
        assert (step_slots[1] == -1).all() and (step_slots[[0, 2]] >= 0).all()


@pytest.mark.parametrize("seed", range(4))
def test_finish_on_device_equals_finish(seed):
    gen = torch.Generator().manual_seed(seed)
    builder = TopKTreeBuilder(num_reqs=3, topk=3, num_draft_tokens=7)
    frontier = builder.expand(torch.log_softmax(torch.randn(3, 1, VOCAB, generator=gen), -1))
    for _ in range(3):
        scores = torch.randn(3, frontier.token_ids.shape[1], VOCAB, generator=gen)
        scores[0] = scores[0, :1]  # ties across a request's frontier: the stable order decides
        frontier = builder.expand(torch.log_softmax(scores, -1))
    tree, padded = builder.finish(), builder.finish_on_device()
    assert padded.token_ids.flatten().tolist() == tree.token_ids.tolist()
    assert padded.parent.flatten().tolist() == tree.parent.tolist()
    assert torch.equal(builder.token_ids.gather(1, padded.source), padded.token_ids)


def test_device_path_reads_nothing_back(monkeypatch):
    """No host read of a tensor anywhere in the device path (the CPU stand-in for "no sync": on CUDA each of these
    would wait for the device, and inside a graph capture raise)."""
    plan = TreePlan(4, 4, 8)
    root = torch.log_softmax(torch.randn(len(PREFIX_LENS), VOCAB, generator=torch.Generator().manual_seed(1)), -1)
    step_scores = [torch.log_softmax(torch.randn(3, 4, VOCAB, generator=torch.Generator().manual_seed(s)), -1)
                   for s in range(1, 4)]
    quiet = StepLayout(torch.tensor(PREFIX_LENS), block_table_tensor(BLOCK_TABLES, torch.device("cpu")), BLOCK_SIZE,
                       64, is_real=torch.tensor([True, True, False]))

    def refuse(*args, **kwargs):
        raise AssertionError("a host read in the device tree path")

    for name in ("tolist", "item", "__bool__", "__int__", "__index__", "cpu", "numpy", "nonzero"):
        monkeypatch.setattr(torch.Tensor, name, refuse)
    monkeypatch.setattr(torch, "nonzero", refuse)
    grown = grow_tree_on_device(plan, root, quiet, lambda step: step_scores[step.step - 1])
    monkeypatch.undo()
    assert grown.token_ids.shape == grown.parent.shape == grown.fed_row.shape == (3, 8)


TRACED_PLAN = TreePlan(3, 4, 9)


def traced_root() -> torch.Tensor:  # [3, VOCAB]
    return torch.log_softmax(torch.cos(torch.arange(len(PREFIX_LENS) * VOCAB).view(-1, VOCAB) * 1.3), dim=-1)


def traced(grow):
    """(grown trees, the records a TreeRoundTrace makes) of one round of `grow` over the scored drafter."""
    recorder = DraftRecorder()
    plan = TRACED_PLAN
    trace = TreeRoundTrace(recorder, ("a", "b", "c"), tuple((7,) * (p + 1) for p in PREFIX_LENS), plan.topk,
                           plan.depth, plan.num_draft_tokens)
    grown = grow(plan, traced_root(), layout(), scored_step([]), trace)
    return grown, recorder.trees


def test_traced_device_round_records_what_the_host_reference_records():
    """The oracle's trace on the device path (what production runs) sees the rounds the host reference sees: same
    fed branches, parent rows, masks, laws and kept trees; and tracing leaves the round unchanged."""
    grown, device = traced(grow_tree_on_device)
    _, host = traced(grow_tree_reference)
    untraced = grow_tree_on_device(TRACED_PLAN, traced_root(), layout(), scored_step([]))
    assert torch.equal(grown.token_ids, untraced.token_ids) and torch.equal(grown.parent, untraced.parent)
    assert [r.request_id for r in device] == ["a", "b", "c"] and len(host) == 3
    for got, want in zip(device, host):
        assert len(got.fed_branches) == 9 and len(got.node_token_ids) == 9
        for name in ("token_ids", "node_token_ids", "parents", "fed_branches", "fed_parent_rows", "fed_sees"):
            assert getattr(got, name) == getattr(want, name), name
        assert torch.equal(got.root_log_probs, want.root_log_probs)
        assert torch.equal(got.fed_log_probs, want.fed_log_probs)
        # a fed row sees its fed ancestors and itself: its depth + 1 rows
        assert [len(sees) for sees in got.fed_sees] == [len(branch) for branch in got.fed_branches]


def test_traced_device_path_reads_back_only_at_the_end(monkeypatch):
    """The trace keeps device copies per step (the step loop stays free of host reads) and reads back once, when
    the round ends."""
    quiet = StepLayout(torch.tensor(PREFIX_LENS), block_table_tensor(BLOCK_TABLES, torch.device("cpu")), BLOCK_SIZE,
                       64, prefix_lens=PREFIX_LENS)
    reads = []

    def refuse(*args, **kwargs):
        raise AssertionError("a host read in the traced device tree path before its end")

    def fake_step(step):  # the scored drafter reads the metadata back itself: a quiet one here
        return torch.log_softmax(torch.cos(step.frontier.token_ids[..., None] * torch.arange(1, VOCAB + 1)), -1)

    names = ("tolist", "item", "__bool__", "__int__", "__index__", "cpu", "numpy", "nonzero")
    for name in names:
        monkeypatch.setattr(torch.Tensor, name, refuse)
    monkeypatch.setattr(torch, "nonzero", refuse)
    recorder = DraftRecorder()
    trace = TreeRoundTrace(recorder, ("a", "b", "c"), ((1,),) * 3, TRACED_PLAN.topk, TRACED_PLAN.depth,
                           TRACED_PLAN.num_draft_tokens)
    finish = trace.finish

    def finish_after_undo(*args):
        monkeypatch.undo()
        reads.append("finish")
        finish(*args)

    trace.finish = finish_after_undo
    grow_tree_on_device(TRACED_PLAN, traced_root(), quiet, fake_step, trace)
    assert reads == ["finish"] and len(recorder.trees) == 3
