"""A hybrid target's verify runs its recurrent layers (Gated DeltaNet, Mamba-2) on the first token of each verify row
only (transformers
PR #46741: a Mamba-2 mixer took its single-token decode branch whenever the cache held a state, whatever the number
of tokens: one conv step, one recurrent step, the first token's output standing for the whole row).

Here: each verify request's newest token goes through the conv and the rule from the slot; its output is reused at
every position of the row, and the state after it is kept for every position. The newest token's logits are right;
those after each draft are not (the recurrent layers never saw the drafts), and the committed state misses every
accepted draft. Prefill and prompt-chunk rows run whole; a plain decode step (one token per row) is untouched, so the
mutant shows only in rounds that draft. On CUDA the uniform verifies replay graphs (recurrent/graph_rows.py): the
target's graphs are captured again through the wrapped forward, whose graph form (every request k + 1 tokens) drops
the drafts with device ops alone.
"""

from __future__ import annotations

import dataclasses

import torch

from specbench.faults.fault import Fault, Mutant
from specbench.faults.path_mutant import recapture_target_graphs, wrap_method
from specbench.recurrent.mixer import RecurrentMixer
from specbench.recurrent.state_rows import StateRows, state_rows
from specbench.speculation.capabilities import Proposer


class StateVerifyOneToken(Mutant):
    fault = Fault("state-verify-one-token", "a hybrid target's verify runs its recurrent layers on the first token of "
                  "each row only", "", "target", Proposer, caught_by="greedy, state oracle")

    def install(self, engine) -> None:
        for module in engine.runner.model.modules():
            if isinstance(module, RecurrentMixer):  # none on a target without recurrent state: inert
                wrap_method(module, "forward", lambda forward, layer=module.state_layer: _first_token_only(forward,
                                                                                                          layer))
        recapture_target_graphs(engine)


def _first_token_only(forward, state_layer: int):
    def bent(x: torch.Tensor, query_start_loc_cpu: tuple[int, ...], states, rows: StateRows,
             paths=None) -> torch.Tensor:
        if rows.graph_query_len:  # a CUDA graph's form: no host offsets, no host-built index inside a capture
            if rows.graph_query_len == 1:  # plain decode: no drafts to drop
                return forward(x, query_start_loc_cpu, states, rows, paths)
            return _graph_first_token_only(forward, state_layer, x, states, rows, paths)
        cu = query_start_loc_cpu
        num_query = [cu[r + 1] - cu[r] for r in range(len(rows.slots))]
        if not any(n > 1 for n, keep in zip(num_query, rows.keeps_positions) if keep):
            return forward(x, query_start_loc_cpu, states, rows, paths)  # no drafts in this forward: nothing to drop
        # the rows that run: a verify request's first, every row of the others
        ran = [min(n, 1) if keep else n for n, keep in zip(num_query, rows.keeps_positions)]
        picked, source = [], []  # [num_run] input rows; [num_tokens] the run row each input row's output comes from
        for r, n in enumerate(num_query):
            first = len(picked)
            picked.extend(range(cu[r], cu[r] + ran[r]))
            source.extend([first] * n if rows.keeps_positions[r] else range(first, first + n))
        run_cu = [0]
        for n in ran:
            run_cu.append(run_cu[-1] + n)
        run_rows = state_rows(list(rows.slots), ran, rows.num_verify_reqs, list(rows.starts_fresh))
        device = x.device
        out = forward(x[torch.tensor(picked, dtype=torch.int64, device=device)], tuple(run_cu), states, run_rows,
                      paths)
        # every kept position of a verify request holds the state after its first token
        kept = [run_rows.pending_starts[r] for r, n in enumerate(num_query) if rows.keeps_positions[r]
                for _ in range(n)]
        conv, recurrent = states.pending[state_layer]
        index = torch.tensor(kept, dtype=torch.int64, device=device)
        states.keep(state_layer, conv[index], recurrent[index])
        return out[torch.tensor(source, dtype=torch.int64, device=device)]

    return bent


def _graph_first_token_only(forward, state_layer: int, x: torch.Tensor, states, rows: StateRows, paths):
    """The graph form's bend: every request's first token through the layer (one-token rows), its output and kept
    state repeated over the row."""
    num_reqs, n = len(rows.slots), rows.graph_query_len
    first_rows = dataclasses.replace(rows, pending_starts=tuple(range(num_reqs)), num_pending=num_reqs,
                                     graph_query_len=1)
    out = forward(x.view(num_reqs, n, -1)[:, 0].contiguous(), (), states, first_rows, paths)
    conv, recurrent = states.pending[state_layer]
    states.keep(state_layer, conv.repeat_interleave(n, dim=0), recurrent.repeat_interleave(n, dim=0))
    return out.repeat_interleave(n, dim=0)
