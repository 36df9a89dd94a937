"""Hand a hybrid target's forward its requests' recurrent-state slots (recurrent/state_rows.py), and commit the
verified states after the verifier: the step runner's two calls for targets with Gated DeltaNet layers; no-ops for
every other target (kv_cache.states is None)."""

from __future__ import annotations

import dataclasses

import torch

from specbench.recurrent.state_rows import state_rows


def with_state_rows(inp, states, request_ids: list[str], num_verify_reqs: int, paths):
    """`inp` (a Prefill/Verify/MixedInput) whose metadata carries each request's slot; its first `num_verify_reqs`
    requests are verify rows (their states are kept per position until `commit_states`)."""
    if states is None:
        return inp
    md = inp.md
    cu = md.query_start_loc_cpu
    num_query = [cu[r + 1] - cu[r] for r in range(md.num_reqs)]
    rows = state_rows([states.slot_for(i) for i in request_ids], num_query, num_verify_reqs)
    states.begin_forward()
    if num_verify_reqs < len(request_ids):
        paths.record("hybrid.state_write")
    return dataclasses.replace(inp, md=dataclasses.replace(md, state_rows=rows))


def commit_states(states, md, num_accepted: torch.Tensor, paths) -> None:
    """After the verifier: each verify request's slot takes the state after its last accepted token
    (num_accepted [num_verify_reqs], device)."""
    if states is None or md.state_rows is None:
        return
    paths.record("hybrid.state_commit")
    states.commit(md.state_rows, num_accepted)
