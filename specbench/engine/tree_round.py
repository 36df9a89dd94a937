"""One tree-drafted decode round (eagle_topk > 1), run by the step loop (engine/step_loop.py): propose a tree,
verify it in one target forward with a tree mask, compact the accepted path's KV, hand the path's target features
to the drafter, return the committed tokens.

Tree rounds run on the synchronous path only: no round drafted ahead (engine/step_loop.py), no whole-round or draft-
step CUDA graphs (execution path `spec.tree_round`); the target's tree verify replays the tree graph of its query
length when CUDA graphs are on (`graph.verify_tree`, engine/model_runner.py), else runs eagerly. The engine takes
this path whenever the run's DraftShape is a tree. The verifier is the torch reference walk
(speculation/tree_verifier.py): greedy = the longest matching path; sampled = recursive rejection over siblings with
the deterministic-children rule, since drafters grow trees from the top-k of their distribution
(speculation/tree_builder.py), not from independent draws: accepting child c_j with the residual's probability
r(c_j), then removing c_j from r, samples exactly from the target distribution (proof in tree_verifier.py), whatever
the draft's quality.
"""

from __future__ import annotations

import torch

from specbench.device_copy import to_device
from specbench.engine.inputs import build_verify_input
from specbench.engine.logprobs import StepLogprobs, logprob_table, raw_logprobs, wanted_top
from specbench.engine.step_runner import StepRunner
from specbench.engine.timing import PhaseTimer
from specbench.speculation.capabilities import DraftsTrees
from specbench.speculation.draft_shape import DraftShape
from specbench.speculation.sampling import SamplingTensors
from specbench.speculation.synthetic_tree import synthetic_tree_verify
from specbench.speculation.tree import DraftTree, tree_from_parents
from specbench.speculation.tree_kv import accepted_path_moves, apply_moves
from specbench.speculation.tree_propose import TreePlan, proposal_tree, tree_plan
from specbench.speculation.tree_stats import TreeAcceptanceCounts, round_counts
from specbench.speculation.tree_verifier import TreeVerifyResult, verify_tree


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
                   needs_features: bool):
    """(committed tokens per request, drafted, accepted, scheduled tokens, logprobs) of one tree round."""
    requests = batch.requests
    paths = runner.paths
    if not all(batch.num_draft_tokens) or plan.depth == 0:  # a request at the context limit: a plain step
        paths.record("decode.sync")
        launch = runner.launch_verify(requests, None, st, timer)
        output_rows, accepted = launch.rows()
        return (*runner.read_verify(launch, output_rows, accepted, hands_features=needs_features), launch.logprobs)
    paths.record("spec.tree_round")
    paths.record(runner.proposer_path)
    timer.start("draft")
    proposal = runner.proposer.propose_tree(runner.propose_input(batch, st), plan)
    timer.stop("draft")
    tree = proposal_tree(proposal)
    inp = build_verify_input(requests, proposal, runner.block_size, runner.device, runner.hooks)
    timer.start("target")
    out = runner.target_runner.verify(inp)
    timer.stop("target")
    timer.start("sample")
    if runner.synthetic_rates is not None:  # forced (depth, rank) acceptance: performance work, NOT lossless
        paths.record("verify.synthetic")
        result = synthetic_tree_verify(out.logits, tree, runner.synthetic_tree_table(plan.depth, plan.topk),
                                       runner.synthetic_generator)
    else:
        paths.record("verify.tree")
        result = verify_tree(out.logits, tree, None, st)
    timer.stop("sample")
    num_accepted = result.num_accepted.tolist()  # the round's host sync
    accepted_paths = [nodes[:n] for nodes, n in zip(result.accepted_nodes.tolist(), num_accepted)]
    outputs = result.output_token_ids.tolist()
    num_cached = [r.num_cached_tokens for r in requests]
    _compact_target_kv(runner.target_runner.kv_cache, requests, result, num_cached, runner.block_size)
    cu_rows = tree.cu_num_rows.tolist()
    path_rows = [[cu_rows[r], *(cu_rows[r] + 1 + n for n in path)] for r, path in enumerate(accepted_paths)]
    committed = []
    for r, request in enumerate(requests):
        if needs_features:  # the root's and the path's features, in path order: never a rejected branch
            rows = to_device(path_rows[r], torch.int64, runner.device)
            runner.proposer.add_target_features(request.request_id, num_cached[r], out.features[rows])
        request.num_cached_tokens += num_accepted[r] + 1
        request.stats.record_tree_round(proposal.num_draft_tokens[r], _depth_of(tree, r), num_accepted[r],
                                        _request_counts(tree, result, r))
        committed.append(outputs[r][: num_accepted[r] + 1])
    runner.proposer.on_tree_verified(tuple(r.request_id for r in requests), tuple(map(tuple, accepted_paths)))
    logprobs = _tree_logprobs(requests, out.logits, path_rows, committed, runner.device)
    return committed, sum(proposal.num_draft_tokens), sum(num_accepted), inp.md.num_tokens, logprobs


def _compact_target_kv(kv, requests, result: TreeVerifyResult, num_cached: list[int], block_size: int) -> None:
    """Move the accepted path's target KV from its tree rows to its positions (speculation/tree_kv.py)."""
    widest = max(len(r.block_table) for r in requests)
    tables = torch.tensor([list(r.block_table) + [0] * (widest - len(r.block_table)) for r in requests],
                          dtype=torch.int32)
    plan = accepted_path_moves(result.accepted_nodes, result.num_accepted,
                               torch.tensor(num_cached, dtype=torch.int64), tables, block_size)
    if plan.num_moves == 0:
        return
    for layer in range(len(kv.k)):
        k_flat, v_flat = kv.flat(layer)
        apply_moves(k_flat, plan)
        apply_moves(v_flat, plan)


def _tree_logprobs(requests, logits: torch.Tensor, path_rows: list[list[int]], committed: list[list[int]],
                   device: torch.device) -> StepLogprobs | None:
    """The emitted tokens' target logprobs: row of the root, then of each accepted node (the rows that predicted
    them), when a request asked."""
    num_top = wanted_top(requests)
    if all(n is None for n in num_top):
        return None
    max_top = max(n for n in num_top if n is not None)
    rows = [row for rows in path_rows for row in rows]
    tokens = [t for c, rows in zip(committed, path_rows) for t in c[: len(rows)]]
    table = logprob_table(raw_logprobs(logits[to_device(rows, torch.int64, device)]),
                          to_device(tokens, torch.int64, device), max_top).cpu()
    first_row, offset = [], 0
    for rows_r in path_rows:
        first_row.append(offset)
        offset += len(rows_r)
    return StepLogprobs(table, max_top, tuple(first_row), num_top)


def _depth_of(tree: DraftTree, r: int) -> int:
    depths = tree.depth[tree.request_slice(r)]
    return int(depths.max()) + 1 if depths.numel() else 0


def _request_counts(tree: DraftTree, result: TreeVerifyResult, r: int) -> TreeAcceptanceCounts:
    """Request r's tree counts of this round (tree_stats.round_counts over a one-request tree)."""
    one = tree_from_parents([tree.tokens_of(r)], [tree.parents_of(r)])
    width = result.accepted_nodes.shape[1]
    sub = TreeVerifyResult(accepted_nodes=result.accepted_nodes[r: r + 1].cpu(),
                           num_accepted=result.num_accepted[r: r + 1].cpu(),
                           output_token_ids=result.output_token_ids[r: r + 1, : width + 1].cpu())
    return round_counts(one, sub)

