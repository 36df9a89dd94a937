"""EAGLE rounds drafted ahead: built on the device from a verify the host has not read (engine/step_loop.py),
then committed when the host has the counts; with the debug invariants on, checked against the reference build."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.device_copy import to_device
from specbench.speculation.eagle.round_graph import AheadRoundInput, check_ahead_round, check_derived_step
from specbench.speculation.eagle.round_input import RoundFeatures, build_round_input
from specbench.speculation.proposer import ProposeInput


@torch.inference_mode()
def propose_ahead(proposer, request_ids: tuple[str, ...], newest_positions: tuple[int, ...],
                  block_tables: tuple[tuple[int, ...], ...], verify_token_ids: torch.Tensor,
                  num_accepted: torch.Tensor, target_features: torch.Tensor | None) -> torch.Tensor | None:
    """The next round's drafts [num_reqs, k] from a verify still on the device, or None when the round cannot
    be built there (no whole-round graph for this k or batch, hooks that draft phase by phase, a request too
    short for the padded catch-up). The catch-up consumes the verify's features on the device: nothing is
    pending on the host until confirm_ahead. While the oracle records, the round's drafts and step logits inputs
    are kept for confirm_ahead, which knows the committed tokens they were drafted from.

    newest_positions [num_reqs]: each request's newest token at the verify; block_tables cover the next
    verify; verify_token_ids [num_reqs, k + 1], num_accepted [num_reqs] and target_features
    [num_reqs * (k + 1), feature_dim] are the verify's outputs, on the device."""
    k = verify_token_ids.shape[1] - 1
    graphs = proposer.round_graphs.get(k)
    if (graphs is None or target_features is None or proposer.hooks.eager_drafting
            or graphs.bucket_for(len(request_ids)) is None):
        return None
    for request_id, newest in zip(request_ids, newest_positions):
        state = proposer.request_state(request_id)
        if newest < k or state.num_committed != newest or state.pending_features is not None:
            return None
    width = max(len(table) for table in block_tables)
    flat_tables = [b for table in block_tables for b in (*table, *(0,) * (width - len(table)))]
    proposer.ahead_query_len = k + 1
    draft_ids = graphs.run_ahead(AheadRoundInput(
        newest_positions=to_device(newest_positions, torch.int64, proposer.device),
        block_tables=to_device(flat_tables, torch.int32, proposer.device).view(len(request_ids), width),
        verify_token_ids=verify_token_ids, num_accepted=num_accepted, target_features=target_features,
    )).clone()
    if proposer.is_recording:  # copies: the graph's outputs are overwritten by its next replay
        proposer.ahead_recording = AheadRecording(
            draft_ids, tuple(x.clone() for x in graphs.logits_inputs(len(request_ids))))
    return draft_ids


@dataclass(frozen=True)
class AheadRecording:
    """A round drafted ahead while the oracle records (the host learns its committed tokens at confirm_ahead)."""

    draft_ids: torch.Tensor  # [num_reqs, k] device
    logits_inputs: tuple[torch.Tensor, ...]  # [k] each [num_reqs, H] device, steps 0 .. k - 1


def record_ahead(proposer, inp: ProposeInput, rows_of_request: tuple[int, ...]) -> None:
    """The recorded round drafted ahead, for the requests of `inp` (rows `rows_of_request` of its batch)."""
    recording, proposer.ahead_recording = proposer.ahead_recording, None
    rows = to_device(rows_of_request, torch.int64, proposer.device)
    draft_ids = recording.draft_ids.index_select(0, rows)  # [len(inp), k], in inp's order
    for j, logits_input in enumerate(recording.logits_inputs):
        proposer._record(inp, list(range(len(rows_of_request))), j, logits_input.index_select(0, rows), draft_ids)


def confirm_ahead(proposer, inp: ProposeInput, verify_features: torch.Tensor, num_accepted: tuple[int, ...],
                  rows_of_request: tuple[int, ...]) -> None:
    """The host read the verify a round was built ahead from. `inp` holds each request's tokens up to its new
    newest (the verified ones, also for a request that stops now): the catch-up is committed up to there.
    With the debug invariants on, the host builds that round the reference way and checks the device's
    build against it."""
    q = proposer.ahead_query_len
    if proposer.ahead_recording is not None and inp.request_ids:
        record_ahead(proposer, inp, rows_of_request)
    proposer.ahead_recording = None
    starts = [len(tokens) - 2 - a for tokens, a in zip(inp.token_ids, num_accepted)]
    if not proposer.debug_invariants or not inp.request_ids:
        for request_id, start, a in zip(inp.request_ids, starts, num_accepted):
            proposer.request_state(request_id).num_committed = start + a + 1
        return
    rows = [r * q + j for r, a in zip(rows_of_request, num_accepted) for j in range(a + 1)]
    cu = [0]
    for a in num_accepted:
        cu.append(cu[-1] + a + 1)
    features = verify_features[to_device(rows, torch.int64, proposer.device)]
    graphs = proposer.round_graphs[q - 1]
    reference = build_round_input(proposer, inp, RoundFeatures(features, tuple(cu), tuple(starts)), q)
    graphs.check_metadata(reference.extend_md, "eagle_extend (ahead)")
    check_ahead_round(graphs.extend, reference, rows_of_request)
    for j, (buffers, md) in enumerate(zip(graphs.steps, reference.step_mds), start=1):
        graphs.check_metadata(md, f"eagle_step_{j} (ahead)")
        check_derived_step(buffers, md, f"eagle_step_{j} (ahead)", rows_of_request)
