"""Hand a hybrid target's forward its requests' recurrent-state slots (recurrent/state_rows.py) and the block
boundaries where it snapshots states (recurrent/state_snapshots.py), and commit the verified states after the
verifier: the step runner's two calls for targets with recurrent-state layers (Gated DeltaNet, Mamba-2); no-ops for
every other target (kv_cache.states is None)."""

from __future__ import annotations

import dataclasses

import torch

from specbench.recurrent.state_rows import state_rows
from specbench.runtime.hooks import PhaseHooks


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
    rows = state_rows(slots, num_query, num_verify_reqs, fresh, points)
    states.begin_forward()
    if num_verify_reqs < len(request_ids):
        paths.record("hybrid.state_write")
    return dataclasses.replace(inp, md=dataclasses.replace(md, state_rows=rows))


def commit_states(states, md, num_accepted: torch.Tensor, paths, hooks: PhaseHooks) -> None:
    """After the verifier: each verify request's slot takes the state after its last accepted token
    (num_accepted [num_verify_reqs], device): kept row pending_start + num_accepted. Every verify request commits,
    a zero-draft one included (its newest token moved its state). No host sync: the rows are built from host
    lists and the device counts."""
    rows = None if states is None else md.state_rows
    if rows is None or rows.num_verify_reqs == 0 or not states.pending:
        return
    paths.record("hybrid.state_commit")
    num_verify = rows.num_verify_reqs
    ends = [*rows.pending_starts[1:num_verify], rows.num_pending]
    num_drafts = [end - start - 1 for start, end in zip(rows.pending_starts[:num_verify], ends)]
    picked = [r for r, is_committed in enumerate(hooks.state_commit_requests(num_drafts)) if is_committed]
    if not picked:
        states.pending.clear()
        return
    device = states.conv.device
    slots = torch.tensor([rows.slots[r] for r in picked], dtype=torch.int64, device=device)
    starts = torch.tensor([rows.pending_starts[r] for r in picked], dtype=torch.int64, device=device)
    drafts = torch.tensor([num_drafts[r] for r in picked], dtype=torch.int64, device=device)
    accepted = num_accepted.to(device=device, dtype=torch.int64)[torch.tensor(picked, device=device)]
    states.commit(slots, starts + hooks.state_commit_rows("conv", accepted, drafts),
                  starts + hooks.state_commit_rows("recurrent", accepted, drafts))
