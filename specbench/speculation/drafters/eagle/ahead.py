"""EAGLE rounds drafted ahead: built on the device from a verify the host has not read (engine/step_loop.py),
then committed when the host has the counts; with the debug invariants on, checked against the reference build.

AheadState is the proposer's record of the round it drafted ahead, from `propose` until `confirm`: which round
graphs drafted it and, while the draft oracle records, that round's outputs. The per-request drafting state it
advances (RequestState.num_committed) is handed in by the proposer, which owns it."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.device_copy import to_device
from specbench.speculation.drafters.eagle.round_graph import (AheadRoundInput, EagleRoundGraphs, check_ahead_round,
                                                     check_derived_step)
from specbench.speculation.drafters.eagle.round_input import RequestState, RoundFeatures, build_round_input
from specbench.speculation.proposer import ProposeInput


@dataclass(frozen=True)
class AheadRecording:
    """A round drafted ahead while the oracle records (the host learns its committed tokens at confirm)."""

    draft_ids: torch.Tensor  # [num_reqs, k] device
    logits_inputs: tuple[torch.Tensor, ...]  # [k] each [num_reqs, H] device, steps 0 .. k - 1


class AheadState:
    def __init__(self, block_size: int, device: torch.device, debug_invariants: bool) -> None:
        self.block_size = block_size
        self.device = device
        # the proposer's: the host rebuilds each round drafted ahead the reference way and checks the device's build
        self.debug_invariants = debug_invariants
        self.graphs: EagleRoundGraphs | None = None  # the round graphs that drafted the last round ahead
        self.recording: AheadRecording | None = None  # that round's outputs while the oracle records, else None

    @torch.inference_mode()
    def propose(self, graphs: EagleRoundGraphs, states: list[RequestState], newest_positions: tuple[int, ...],
                block_tables: tuple[tuple[int, ...], ...], verify_token_ids: torch.Tensor,
                num_accepted: torch.Tensor, target_features: torch.Tensor | None, *,
                is_recording: bool) -> torch.Tensor | None:
        """The next round's drafts [num_reqs, k] from a verify still on the device, drafted by `graphs` (the
        whole-round graphs for this k), or None when the round cannot be built there (no target features, no
        bucket for this batch, a request too short for the padded catch-up). The catch-up consumes the verify's
        features on the device: nothing is pending on the host until confirm. `is_recording`: keep the round's
        drafts and step logits inputs for the oracle (confirm hands them over with the committed tokens).

        states [num_reqs]: each request's drafting state; newest_positions [num_reqs]: each request's newest
        token at the verify; block_tables cover the next verify; verify_token_ids [num_reqs, k + 1],
        num_accepted [num_reqs] and target_features [num_reqs * (k + 1), feature_dim] are the verify's outputs,
        on the device."""
        k = verify_token_ids.shape[1] - 1
        if target_features is None or graphs.bucket_for(len(states)) is None:
            return None
        for state, newest in zip(states, newest_positions):
            if newest < k or state.num_committed != newest or state.pending_features is not None:
                return None
        width = max(len(table) for table in block_tables)
        flat_tables = [b for table in block_tables for b in (*table, *(0,) * (width - len(table)))]
        self.graphs = graphs
        draft_ids = graphs.run_ahead(AheadRoundInput(
            newest_positions=to_device(newest_positions, torch.int64, self.device),
            block_tables=to_device(flat_tables, torch.int32, self.device).view(len(states), width),
            verify_token_ids=verify_token_ids, num_accepted=num_accepted, target_features=target_features,
        )).clone()
        if is_recording:  # copies: the graph's outputs are overwritten by its next replay
            self.recording = AheadRecording(
                draft_ids, tuple(x.clone() for x in graphs.logits_inputs(len(states))))
        return draft_ids

    def take_recording(self) -> AheadRecording | None:
        """The recorded round drafted ahead, handed over once (None when the oracle was not recording)."""
        recording, self.recording = self.recording, None
        return recording

    def confirm(self, inp: ProposeInput, states: list[RequestState], verify_features: torch.Tensor,
                num_accepted: tuple[int, ...], rows_of_request: tuple[int, ...]) -> None:
        """The host read the verify the last round was drafted ahead from. `inp` holds each request's tokens up to
        its new newest (the verified ones, also for a request that stops now), `states` their drafting states:
        the catch-up is committed up to there. With the debug invariants on, the host builds that round the
        reference way and checks the device's build against it."""
        starts = [len(tokens) - 2 - a for tokens, a in zip(inp.token_ids, num_accepted)]
        if not self.debug_invariants or not inp.request_ids:
            for state, start, a in zip(states, starts, num_accepted):
                state.num_committed = start + a + 1
            return
        graphs = self.graphs
        q = graphs.query_len
        rows = [r * q + j for r, a in zip(rows_of_request, num_accepted) for j in range(a + 1)]
        cu = [0]
        for a in num_accepted:
            cu.append(cu[-1] + a + 1)
        features = verify_features[to_device(rows, torch.int64, self.device)]
        reference = build_round_input(inp, RoundFeatures(features, tuple(cu), tuple(starts)), q, states,
                                      self.block_size, self.device, with_step_mds=True)
        graphs.check_metadata(reference.extend_md, "eagle_extend (ahead)")
        check_ahead_round(graphs.extend, reference, rows_of_request)
        for j, (buffers, md) in enumerate(zip(graphs.steps, reference.step_mds), start=1):
            graphs.check_metadata(md, f"eagle_step_{j} (ahead)")
            check_derived_step(buffers, md, f"eagle_step_{j} (ahead)", rows_of_request)
