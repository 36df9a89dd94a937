"""Hand a hybrid target's forward its requests' recurrent-state slots (recurrent/state_rows.py) and the block
boundaries where it snapshots states (recurrent/state_snapshots.py), and commit the verified states after the
verifier: the step runner's two calls for targets with recurrent-state layers (Gated DeltaNet, Mamba-2), and a tree
round's two (`with_tree_state_rows`, `commit_tree_states`: Gated DeltaNet only); no-ops for every other target
(kv_cache.states is None)."""

from __future__ import annotations

import dataclasses

import torch

from specbench.device_copy import to_device
from specbench.recurrent.mixer import write_verify_snapshots
from specbench.recurrent.state_rows import state_rows
from specbench.recurrent.tree_verify import TreeStateRows
from specbench.runtime.hooks import PhaseHooks
from specbench.speculation.tree.padded import PaddedTree
from specbench.speculation.verify.tree import TreeVerifyResult


def with_state_rows(inp, states, request_ids: list[str], num_verify_reqs: int, paths, hooks: PhaseHooks):
    """`inp` (a Prefill/Verify/MixedInput) whose metadata carries each request's slot; its first `num_verify_reqs`
    requests are verify rows (their states are kept per position until `commit_states`)."""
    if states is None:
        return inp
    md = inp.md
    cu = md.query_start_loc_cpu
    num_query = [cu[r + 1] - cu[r] for r in range(md.num_reqs)]
    # a row from position 0 is a (re)prefill: zeros, never its slot's previous owner's state
    first = [md.positions_cpu[cu[r]] if n > 0 else 0 for r, n in enumerate(num_query)]
    fresh = hooks.state_starts_fresh([n > 0 and first[r] == 0 for r, n in enumerate(num_query)])
    # with prefix caching, the states at block boundaries the rows cross go to the snapshot store too
    points = () if states.snapshots is None else states.snapshots.plan(request_ids, first, num_query)
    slots = hooks.state_slots(tuple(request_ids), [states.slot_for(i) for i in request_ids])
    rows = state_rows(slots, num_query, num_verify_reqs, fresh, points, _slot_index(slots, states))
    states.begin_forward()
    if num_verify_reqs < len(request_ids):
        paths.record("hybrid.state_write")
    return dataclasses.replace(inp, md=dataclasses.replace(md, state_rows=rows))


def _slot_index(slots: list[int], states) -> torch.Tensor | None:  # [num_reqs] int64 on the slots' device
    """The forward's slots as a device tensor, copied once per forward (StateRows.slot_index)."""
    return to_device(list(slots), torch.int64, states.conv.device) if slots else None


def commit_states(states, md, num_accepted: torch.Tensor, paths, hooks: PhaseHooks) -> None:
    """After the verifier: each verify request's slot takes the state after its last accepted token
    (num_accepted [num_verify_reqs], device): kept row pending_start + num_accepted. Every verify request commits,
    a zero-draft one included (its newest token moved its state). First the verify rows' kept states at snapshot
    points go to the store, after the forward whether it ran eagerly or replayed a graph. No host sync: the rows
    are built from host lists and the device counts."""
    rows = None if states is None else md.state_rows
    if rows is None or rows.num_verify_reqs == 0 or not states.pending:
        return
    write_verify_snapshots(states, rows)
    _commit(states, rows, num_accepted, paths, hooks)


def with_tree_state_rows(inp, states, requests, padded: PaddedTree, depth: int, paths, hooks: PhaseHooks):
    """`inp` (a tree round's VerifyInput: each request's root, then its padded.width nodes in node order) whose
    metadata carries each request's slot and the tree its rows' states follow (recurrent/tree_verify.py): every
    request a verify row, none fresh (its root sits at its committed length). `depth`: the round's TreePlan depth,
    the deepest node's depth below the root. No host read: the tree stays on the device."""
    if states is None:
        return inp
    request_ids = [r.request_id for r in requests]
    num_reqs, num_rows = padded.num_reqs, 1 + padded.width
    device = padded.parent.device
    slots = hooks.state_slots(tuple(request_ids), [states.slot_for(i) for i in request_ids])
    rows = state_rows(slots, [num_rows] * num_reqs, num_reqs, slot_index=_slot_index(slots, states))
    roots = torch.arange(num_reqs, device=device) * num_rows  # [num_reqs] each root's kept row
    # a node continues its parent node's row (1 + parent), a child of the root (-1) the root's; padding (-2) the root's
    node_parents = roots[:, None] + 1 + padded.parent.clamp_min(-1)  # [num_reqs, width]
    parent_rows = torch.cat([torch.full_like(roots[:, None], -1), node_parents], dim=1).reshape(-1)
    depths = torch.nn.functional.pad(1 + padded.depth, (1, 0)).reshape(-1)  # [num_rows * num_reqs], root 0
    request = torch.arange(num_reqs, device=device).repeat_interleave(num_rows)
    points = () if states.snapshots is None else states.snapshots.plan(
        request_ids, [r.num_cached_tokens for r in requests], [1 + depth] * num_reqs)
    tree = TreeStateRows(hooks.state_tree_parents(parent_rows), request, depths, depth + 1, points)
    states.begin_forward()
    paths.record("hybrid.tree_verify")
    md = inp.md
    return dataclasses.replace(inp, md=dataclasses.replace(md, state_rows=dataclasses.replace(rows, tree=tree)))


def commit_tree_states(states, md, result: TreeVerifyResult, paths, hooks: PhaseHooks) -> None:
    """After a tree round's verifier: each request's slot takes the state after the last node of its accepted path
    (its root's when none was accepted), and the snapshot points the path crossed take the path's node there. On
    the device, no host read."""
    rows = None if states is None else md.state_rows
    if rows is None or rows.tree is None or not states.pending:
        return
    device = states.conv.device
    nodes = result.accepted_nodes.to(device)  # [num_reqs, path_width]
    num_accepted = result.num_accepted.to(device=device, dtype=torch.int64)  # [num_reqs]
    points = rows.tree.snapshots
    if points:  # before the commit clears the kept rows
        request = to_device([p.request for p in points], torch.int64, device)
        starts = to_device([rows.pending_starts[p.request] for p in points], torch.int64, device)
        at = _path_rows(nodes, num_accepted, request, to_device([p.row for p in points], torch.int64, device))
        states.snapshot_kept(to_device([p.entry for p in points], torch.int64, device), starts + at)
    every = torch.arange(nodes.shape[0], device=device)
    _commit(states, rows, _path_rows(nodes, num_accepted, every, num_accepted), paths, hooks)


def _path_rows(nodes: torch.Tensor, num_accepted: torch.Tensor, request: torch.Tensor,
               depth: torch.Tensor) -> torch.Tensor:  # [n] int64
    """The kept row, counted from its request's root, of the accepted path's node at `depth` (0: the root) of each
    `request` ([n] each): 1 + the node's index; the root's (0) where the path is shorter (a snapshot point past it
    is rewritten by the forward that later commits that position). nodes [num_reqs, path_width] -1 past the path;
    num_accepted [num_reqs]."""
    if nodes.shape[1] == 0:
        return torch.zeros_like(depth)
    node = nodes[request, (depth - 1).clamp(0, nodes.shape[1] - 1)]
    return torch.where((depth >= 1) & (depth <= num_accepted[request]), 1 + node, 0)


def _commit(states, rows, accepted: torch.Tensor, paths, hooks: PhaseHooks) -> None:
    """Each verify request's slot takes its kept row pending_start + accepted[r] (accepted [num_verify_reqs] int64
    on the device: a chain's accepted count, a tree's accepted path's last node row)."""
    paths.record("hybrid.state_commit")
    num_verify = rows.num_verify_reqs
    ends = [*rows.pending_starts[1:num_verify], rows.num_pending]
    num_drafts = [end - start - 1 for start, end in zip(rows.pending_starts[:num_verify], ends)]
    picked = [r for r, is_committed in enumerate(hooks.state_commit_requests(num_drafts)) if is_committed]
    if not picked:
        states.pending.clear()
        return
    device = states.conv.device
    # Pinned, non-blocking copies: a pageable one would hold the host until the stream drains, the step launched
    # ahead included (overlapped decode), serialising host and GPU (H100, session 22: ~1.2 ms a step at c=1).
    slots = to_device([rows.slots[r] for r in picked], torch.int64, device)
    starts = to_device([rows.pending_starts[r] for r in picked], torch.int64, device)
    drafts = to_device([num_drafts[r] for r in picked], torch.int64, device)
    accepted = accepted.to(device=device, dtype=torch.int64)[to_device(picked, torch.int64, device)]
    states.commit(slots, starts + hooks.state_commit_rows("conv", accepted, drafts),
                  starts + hooks.state_commit_rows("recurrent", accepted, drafts))
