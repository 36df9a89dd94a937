"""Host side of a graphed EAGLE round: when a round fits the graph, and its padded catch-up plus step metadata."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.attention.metadata import PADDING_SLOT, build_metadata, slot_of
from specbench.device_copy import to_device
from specbench.speculation.drafters.eagle.round_graph import RoundInput
from specbench.speculation.proposer import ProposeInput
from specbench.speculation.drafters.step_plan import draft_step_metadata


@dataclass
class RequestState:
    num_committed: int = 0  # draft KV at positions [0, num_committed) came from target features
    # Target features of committed tokens not caught up yet, for positions [pending_start, pending_start + len).
    pending_features: torch.Tensor | None = None  # [num_pending, feature_dim]
    pending_start: int = 0


@dataclass(frozen=True)
class RoundFeatures:
    """The target features a round catches up over: request r owns rows cu_num_new_features[r]:[r + 1],
    for positions new_feature_start[r] + 0, 1, ..."""

    new_features: torch.Tensor | None  # [num_new_total, feature_dim]; None when no request has any
    cu_num_new_features: tuple[int, ...]  # [num_reqs + 1]
    new_feature_start: tuple[int, ...]  # [num_reqs]


def is_graphable_round(inp: ProposeInput, feats: RoundFeatures, caught_up: list[int], active: list[int],
                       graphs) -> bool:
    """Every request drafts k and catches up over <= k + 1 positions with room for leading padding."""
    num_reqs = len(inp.request_ids)
    if graphs.bucket_for(num_reqs) is None:
        return False
    if len(active) != num_reqs or len(caught_up) != num_reqs:
        return False
    q = graphs.query_len
    for r in range(num_reqs):
        num_new = feats.cu_num_new_features[r + 1] - feats.cu_num_new_features[r]
        if inp.num_draft_tokens[r] != q - 1 or num_new > q or feats.new_feature_start[r] < q - num_new:
            return False
    return True


def build_round_input(inp: ProposeInput, feats: RoundFeatures, q: int, states: list[RequestState], block_size: int,
                      device: torch.device, *, with_step_mds: bool) -> RoundInput:
    """The catch-up padded to q queries per request (padding first, at committed positions, slot -1); it commits
    each request's draft KV (`states` [num_reqs], the proposer's) up to its newest token. `with_step_mds`: also
    build every draft step's metadata the reference way (the debug invariants check the graph's against it)."""
    input_ids: list[int] = []
    positions: list[int] = []
    slots: list[int] = []
    real_rows: list[int] = []  # row of each real catch-up query in the padded layout
    seq_lens: list[int] = []
    for r, request_id in enumerate(inp.request_ids):
        tokens, table = inp.token_ids[r], inp.block_tables[r]
        start = feats.new_feature_start[r]
        num_new = feats.cu_num_new_features[r + 1] - feats.cu_num_new_features[r]
        state = states[r]
        if start != state.num_committed or start + num_new != len(tokens) - 1:
            raise RuntimeError(f"{request_id}: catch-up over [{start}, {start + num_new}) but draft KV is "
                               f"committed up to {state.num_committed}, newest token at {len(tokens) - 1}")
        num_pad = q - num_new
        input_ids += [0] * num_pad + list(tokens[start + 1 : start + num_new + 1])
        positions += range(start - num_pad, start + num_new)
        slots += [PADDING_SLOT] * num_pad + [slot_of(table, p, block_size)
                                             for p in range(start, start + num_new)]
        real_rows += range(r * q + num_pad, r * q + q)
        seq_lens.append(start + num_new)
        state.num_committed = start + num_new
    block_tables = list(inp.block_tables)
    extend_md = build_metadata(positions=positions, num_query=[q] * len(seq_lens), seq_lens=seq_lens,
                               block_tables=block_tables, block_size=block_size, device=device, slot_mapping=slots)
    # The graph derives the steps' metadata itself; the reference build is only for the debug invariants.
    step_mds = () if not with_step_mds else tuple(
        draft_step_metadata(first_positions=[len(t) - 1 for t in inp.token_ids], step=j,
                            block_tables=block_tables, block_size=block_size, device=device)
        for j in range(1, q - 1)
    )
    return RoundInput(to_device(input_ids, torch.int64, device), extend_md, feats.new_features,
                      to_device(real_rows, torch.int64, device), step_mds)
