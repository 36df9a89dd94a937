"""One tree-drafted decode round (eagle_topk > 1), run by the step loop (engine/step_loop.py): propose a tree,
verify it in one target forward with a tree mask, compact the accepted path's KV, hand the path's target features
to the drafter, return the committed tokens.

Tree rounds run on the synchronous path only: no round drafted ahead (engine/step_loop.py; execution path
`spec.tree_round`); the drafter's steps replay its tree draft graphs where captured (speculation/tree/graph.py);
the target's tree verify replays the tree graph of its query length when CUDA graphs are on (`graph.verify_tree`,
engine/model_runner.py), else runs eagerly. The engine takes this path whenever the run's DraftShape is a tree.
The verifier is the batched one (speculation/verify/tree_batched.py, tested against the torch reference walk of
verify/tree.py): greedy = the longest matching path; sampled = recursive rejection over siblings with the
deterministic-children rule, since drafters grow trees from the top-k of their distribution
(speculation/tree/builder.py), not from independent draws: accepting child c_j with the residual's probability
r(c_j), then removing c_j from r, samples exactly from the target distribution (proof in verify/tree.py),
whatever the draft's quality.

The verify input is laid out on the device from the proposal (engine/tree_inputs.py), so the host queues the
target's verify right behind the draft; after the target's forward everything runs on the device too (verify, KV
compaction over all layers, the path's features and logprob rows, the stats' path shape) and the host reads the
round once (`finish_tree_round`): the accepted counts, tokens and path shape of every request in one tensor.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from specbench.device_copy import to_device
from specbench.engine.logprobs import StepLogprobs, logprob_table, raw_logprobs, wanted_top
from specbench.engine.state_attach import commit_tree_states, with_tree_state_rows
from specbench.engine.step_runner import StepResult, StepRunner
from specbench.engine.timing import PhaseTimer
from specbench.engine.tree_inputs import build_uniform_tree_verify_input, is_uniform
from specbench.grammar.tree_draft_mask import TreeDraftMask
from specbench.runtime.phases import TargetOutput
from specbench.speculation.capabilities import DraftsTrees
from specbench.speculation.draft_shape import DraftShape
from specbench.speculation.sampling import SamplingTensors
from specbench.speculation.synthetic.tree import synthetic_tree_verify
from specbench.speculation.tree.draft_tree import DraftTree, TreeShapeError
from specbench.speculation.tree.kv import move_slots_all_layers, padded_path_moves
from specbench.speculation.tree.padded import PaddedTree, pad_tree, path_shape
from specbench.speculation.tree.plan import TreePlan, tree_plan
from specbench.speculation.verify.tree_stats import path_round_counts
from specbench.speculation.verify.tree import TreeVerifyResult
from specbench.speculation.verify.tree_batched import verify_tree_batched


def is_tree_round(shape: DraftShape, proposer, batch) -> bool:
    """A decode batch the step loop runs as a tree round: the run's shape is a tree and its proposer drafts trees."""
    return shape.is_tree and isinstance(proposer, DraftsTrees) and any(batch.num_draft_tokens)


def round_plan(shape: DraftShape, num_steps: int, max_model_len: int, requests) -> TreePlan:
    """The run's tree, its depth cut so that every request's deepest path and bonus fit max_model_len."""
    plan = tree_plan(shape, num_steps)
    room = max(0, min(max_model_len - r.num_tokens - 1 for r in requests))
    if room >= plan.depth:
        return plan
    shallower = tree_plan(shape, room)
    return TreePlan(plan.topk, room, min(plan.num_draft_tokens, shallower.num_draft_tokens))


def run_tree_round(runner: StepRunner, batch, st: SamplingTensors, timer: PhaseTimer, plan: TreePlan, *,
                   needs_features: bool) -> StepResult:
    """One tree round, read back (a plain step for a batch with a request at the context limit)."""
    requests = batch.requests
    paths = runner.paths
    if not all(batch.num_draft_tokens) or plan.depth == 0:  # a request at the context limit: a plain step
        paths.record("decode.sync")
        launch = runner.launch_verify(requests, None, st, timer)
        output_rows, accepted = launch.rows()
        return runner.read_verify(launch, output_rows, accepted, hands_features=needs_features)
    paths.record("spec.tree_round")
    paths.record(runner.proposer_path)
    timer.start("draft")
    inp = runner.propose_input(batch, st)
    if runner.is_constrained(requests) and runner.grammar.is_drafting_masked:
        paths.record("grammar.tree_draft_mask")
        inp = dataclasses.replace(inp, draft_mask=TreeDraftMask(runner.grammar, requests))
    proposal = runner.proposer.propose_tree(inp, plan)
    timer.stop("draft")
    # DraftsTrees proposers grow every request the same node count (TopKTreeBuilder under one plan), so the verify
    # input is laid out on the device and queued right behind the draft, with no host read in between.
    assert is_uniform(proposal), f"a tree proposal with ragged node counts {proposal.num_draft_tokens}"
    paths.record("tree.device_layout")
    layout = build_uniform_tree_verify_input(requests, proposal, runner.block_size, runner.device,
                                             read_back=runner.debug_invariants)
    inp = with_tree_state_rows(layout.inp, runner.states, requests, layout.padded, plan.depth, paths, runner.hooks)
    # A constrained batch reads its trees before the target's forward is enqueued, so the masks of every branch are
    # walked on the host while it runs (the drafts are final: the draft's one sync).
    host_tree = _host_tree(proposal) if runner.is_constrained(requests) else None
    timer.start("target")
    out = runner.target_runner.verify(inp)
    timer.stop("target")
    committed, num_accepted, logprobs = finish_tree_round(runner, requests, st, timer, plan, layout.tree,
                                                          proposal.num_draft_tokens, inp.md.block_tables, out,
                                                          needs_features=needs_features, padded=layout.padded,
                                                          host_tree=host_tree, md=inp.md)
    return StepResult(committed, sum(proposal.num_draft_tokens), num_accepted, inp.md.num_tokens, logprobs)


def finish_tree_round(runner: StepRunner, requests, st: SamplingTensors, timer: PhaseTimer, plan: TreePlan,
                      tree: DraftTree, num_nodes: tuple[int, ...], block_tables: torch.Tensor, out: TargetOutput, *,
                      needs_features: bool, padded: PaddedTree | None = None,
                      host_tree: HostTree | None = None,
                      md=None) -> tuple[list[list[int]], int, StepLogprobs | None]:
    """Everything after the target's tree verify, launched on the device with no host read until the round's one
    sync: verify, KV compaction, the path's features and logprob rows, the stats' path shape. Then the host
    bookkeeping per request from that one read. num_nodes [num_reqs]: host copy of tree.num_nodes; block_tables
    [num_reqs, max_num_blocks] int32 on the device (the verify's). (committed tokens per request, accepted drafts
    in all, logprobs). `padded`: the tree padded to max(num_nodes) when the caller built it already.
    `host_tree`: the drafted trees on the host, given for a constrained batch: the verifier reads out.logits masked
    by each branch's grammar state (grammar/book.py masked_tree_logits; greedy and sampled verification both see
    only what each branch's grammar allows); the logprobs are reported from out.logits, as the model produced them.
    `md`: the verify's metadata, whose state rows a hybrid target's commit reads (commit_tree_states)."""
    paths = runner.paths
    timer.start("sample")
    padded = pad_tree(tree, max(num_nodes)) if padded is None else padded
    logits = out.logits
    if host_tree is not None:
        logits = runner.grammar.masked_tree_logits(out.logits, requests, host_tree.tokens, host_tree.parents)
    if runner.synthetic_rates is not None:  # forced (depth, rank) acceptance: performance work, NOT lossless
        paths.record("verify.synthetic")
        result = synthetic_tree_verify(out.logits, tree, runner.synthetic_tree_table(plan.depth, plan.topk),
                                       runner.synthetic_generator, padded)
    else:
        paths.record("verify.tree")
        result = verify_tree_batched(logits, tree, st, num_nodes, padded)
    if md is not None:  # a hybrid target: each slot takes the state after its accepted path's last node
        commit_tree_states(runner.states, md, result, paths, runner.hooks)
    timer.stop("sample")
    num_cached = [r.num_cached_tokens for r in requests]
    _compact_target_kv(runner.target_runner.kv_cache, block_tables, result,
                       to_device(num_cached, torch.int64, runner.device), runner.block_size)
    path_rows = _path_rows(padded, result)  # [num_reqs, path_width + 1]
    features = out.features[path_rows.reshape(-1)].view(*path_rows.shape, -1) if needs_features else None
    table = _tree_logprob_table(requests, out.logits, path_rows, result.output_token_ids)
    num_children, ranks = path_shape(padded, result.accepted_nodes, result.num_accepted)
    tree_depth = torch.where(padded.is_node, padded.depth + 1, 0).amax(dim=1)  # width >= 1 here
    read = _HostRound(torch.cat([result.num_accepted[:, None], tree_depth[:, None], result.output_token_ids,
                                 result.accepted_nodes, num_children, ranks, _malformed_node(padded)[:, None]],
                                dim=1).tolist())  # the round's sync
    read.check_trees()
    committed, accepted_paths, num_accepted = [], [], 0
    for r, request in enumerate(requests):
        n = read.num_accepted(r)
        if features is not None:  # the root's and the path's features, in path order: never a rejected branch
            runner.proposer.add_target_features(request.request_id, num_cached[r], features[r, : n + 1])
        request.num_cached_tokens += n + 1
        request.stats.record_tree_round(num_nodes[r], read.tree_depth(r), n,
                                        path_round_counts(num_nodes[r], read.num_children(r), read.ranks(r)))
        committed.append(read.output(r))
        accepted_paths.append(read.path(r))
        num_accepted += n
    runner.proposer.on_tree_verified(tuple(r.request_id for r in requests), tuple(accepted_paths))
    if host_tree is not None:  # each constrained request's grammar follows its accepted path and bonus
        runner.grammar.settle(requests, [read.num_accepted(r) for r in range(len(requests))], committed)
    logprobs = None if table is None else StepLogprobs(table[0].cpu(), table[1],
                                                       tuple(r * path_rows.shape[1] for r in range(len(requests))),
                                                       wanted_top(requests))
    return committed, num_accepted, logprobs


@dataclass(frozen=True, slots=True)
class HostTree:
    """A tree proposal's drafts on the host: what a constrained batch's grammar masks walk."""

    tokens: list[list[int]]  # [num_reqs][num_nodes_r]
    parents: list[list[int]]  # [num_reqs][num_nodes_r] request-local parent, -1 = a child of the root


def _host_tree(proposal) -> HostTree:
    """The proposal's trees on the host (one read of the drafts)."""
    counts = proposal.num_draft_tokens
    rows = torch.stack([proposal.draft_token_ids, proposal.parents]).tolist()
    return HostTree([t[:n] for t, n in zip(rows[0], counts)], [p[:n] for p, n in zip(rows[1], counts)])


def _malformed_node(tree: PaddedTree) -> torch.Tensor:  # [num_reqs] int64, -1 = none
    """Each request's first node whose parent does not precede it (nor is the root): the drafters' trees never have
    one, but the verify layout derived the depths on the device without checking (engine/tree_inputs.py), so the
    round's one read carries this check instead of a read of its own."""
    slot = torch.arange(tree.width, device=tree.parent.device)
    is_bad = tree.is_node & ((tree.parent < -1) | (tree.parent >= slot[None, :]))
    return torch.where(is_bad.any(dim=1), is_bad.long().argmax(dim=1), -1)


class _HostRound:
    """The host's copy of one tree round, one row per request: num_accepted, tree depth, output tokens
    [path_width + 1], accepted nodes [path_width], children of the root and path nodes [path_width + 1], path
    ranks [path_width], the first malformed node or -1 (run_tree_round's one read)."""

    def __init__(self, rows: list[list[int]]) -> None:
        self.rows = rows
        self.path_width = (len(rows[0]) - 5) // 4 if rows else 0

    def check_trees(self) -> None:
        """Refuse the round if a request's tree had a node whose parent does not precede it (a proposer's bug: its
        depths, positions and mask were wrong)."""
        for r, row in enumerate(self.rows):
            if row[-1] >= 0:
                raise TreeShapeError(f"request {r}: drafted tree node {row[-1]} has a parent that does not precede "
                                     f"it; the round's verify layout is invalid")

    def num_accepted(self, r: int) -> int:
        return self.rows[r][0]

    def tree_depth(self, r: int) -> int:
        return self.rows[r][1]

    def output(self, r: int) -> list[int]:
        return self.rows[r][2: 3 + self.num_accepted(r)]

    def path(self, r: int) -> tuple[int, ...]:
        start = 3 + self.path_width
        return tuple(self.rows[r][start: start + self.num_accepted(r)])

    def num_children(self, r: int) -> list[int]:
        start = 3 + 2 * self.path_width
        return self.rows[r][start: start + self.path_width + 1]

    def ranks(self, r: int) -> list[int]:
        start = 4 + 3 * self.path_width
        return self.rows[r][start: start + self.num_accepted(r)]


def _compact_target_kv(kv, block_tables: torch.Tensor, result: TreeVerifyResult, num_cached: torch.Tensor,
                       block_size: int) -> None:
    """Move the accepted path's target KV from its tree rows to its positions (speculation/tree/kv.py), over every
    layer in two launches, with no host read. block_tables [num_reqs, max_num_blocks] int32 and num_cached
    [num_reqs] int64 (the root's position) on the device."""
    if result.accepted_nodes.shape[1] == 0:
        return
    move_slots_all_layers(kv, padded_path_moves(result.accepted_nodes, result.num_accepted, num_cached, block_tables,
                                                block_size))


def _path_rows(tree: PaddedTree, result: TreeVerifyResult) -> torch.Tensor:  # [num_reqs, path_width + 1] int64
    """Target rows of the root and of each accepted node, root first; past the path the root's row (a valid index
    whose rows nobody reads)."""
    nodes = torch.nn.functional.pad(result.accepted_nodes, (1, 0), value=-1)
    return tree.first_row[:, None] + torch.where(nodes >= 0, 1 + nodes, 0)


def _tree_logprob_table(requests, logits: torch.Tensor, path_rows: torch.Tensor,
                        output_token_ids: torch.Tensor) -> tuple[torch.Tensor, int] | None:
    """The emitted tokens' target logprobs on the device, [num_reqs * (path_width + 1), 2 + 2 * max_top]
    (logprob_table): request r's token j at row r * (path_width + 1) + j, from the row that predicted it (the
    root's, then each accepted node's); and max_top. None when no request asked."""
    num_top = wanted_top(requests)
    if all(n is None for n in num_top):
        return None
    max_top = max(n for n in num_top if n is not None)
    return logprob_table(raw_logprobs(logits[path_rows.reshape(-1)]), output_token_ids.reshape(-1), max_top), max_top
