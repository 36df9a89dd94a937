"""Several MTP modules (DeepSeek-V3's num_nextn_predict_layers > 1): each module its own KV layer, module i drafting
step i, the last one reused past their number, as production engines do.

Semantics (DeepSeek-V3 section 2.2; transformers' MtpModel / MTPCandidateGenerator run the same chain). Module k
(1-based depth) at sequence index i reads [enorm(embedding of t_{i+k}); hnorm(h^{k-1}_i)], where h^0_i is the target's
final hidden at i and h^{k-1}_i the previous module's output at the same index; it predicts t_{i+k+1}. Here module
m = k - 1 (0-based) runs at position q = i + m, so every module pairs the token at q + 1 with its hidden input (as the
one-module proposer does) and its query positions line up with the draft steps:
- module 0 at q: (token q + 1, the target's hidden at q): the catch-up, and draft step 0 at newest - 1;
- module m >= 1 at q: (token q + 1, module m - 1's output at q - 1). Its committed rows (the catch-up, q <= newest - 1)
  read module m - 1's catch-up output one row back: the previous round's last row is kept per request for a round's
  first row (`carry`). At q < m the chain has no row (DeepSeek's module m starts m tokens later; transformers builds
  none): specbench feeds a zero hidden there (hnorm(0) = 0: the row sees its token alone), which only moves drafts;
- draft step j < num_modules runs module j over j queries, positions newest .. newest + j - 1 (tokens draft 1 ..
  draft j, hidden module j - 1's outputs at newest - 1 .. newest + j - 2): its rows past newest depend on the drafts
  (transformers' rolled ids) and are scratch the next catch-up overwrites; the last row gives draft j + 1. With two
  modules step 1 is one query;
- draft step j >= num_modules reuses the last module: one query at newest - 1 + j fed step j - 1's last output.
Rounds run eagerly (no CUDA graphs, no drafting ahead): the graphed EAGLE round is one module's.
"""

from __future__ import annotations

import torch

from specbench.attention.metadata import build_metadata
from specbench.device_copy import to_device
from specbench.speculation.drafters.mtp.proposer import MtpProposer
from specbench.speculation.proposer import DraftProposal, ProposeInput


class MultiModuleMtpProposer(MtpProposer):
    # Module m + 1's catch-up starts from module m's output one position back (the carry, in no KV block): a request
    # can only start drafting at position 0, so a prefix hit cannot resume it.
    draft_kv_lookahead = None

    def __init__(self, loaded, block_size: int, device: torch.device, hooks, debug_invariants: bool = False) -> None:
        super().__init__(loaded, block_size, device, hooks, debug_invariants=debug_invariants)
        self.modules = loaded.modules  # [num_modules] MtpHead, module i at index i
        # request -> [num_modules - 1, H]: module m's catch-up output at the last committed position (module m + 1's
        # hidden input for the next round's first catch-up row)
        self._carry: dict[str, torch.Tensor] = {}

    def enable_cuda_graphs(self, plan) -> None:
        self.modules[0].rotary.reserve(plan.max_positions, plan.device)  # eager rounds: no graphs to capture

    def prepare_cuda_graphs(self, num_steps: int) -> None:
        """Eager rounds only (module docstring)."""

    def propose_ahead(self, request_ids, newest_positions, block_tables, verify_token_ids, num_accepted,
                      target_features) -> None:
        return None  # never drafted ahead: the engine proposes after each verify

    def free(self, request_id: str) -> None:
        super().free(request_id)
        self._carry.pop(request_id, None)

    @torch.inference_mode()
    def propose(self, inp: ProposeInput) -> DraftProposal:
        draft_ids, feats, caught_up, active = self._start_round(inp)
        num_reqs, max_num_draft = draft_ids.shape
        if not caught_up:
            return DraftProposal(draft_ids, inp.num_draft_tokens, None)
        self.head.attn_backend.paths.record("eagle.eager")
        starts = [feats.new_feature_start[r] for r in caught_up]
        extend = self._build_extend(inp, feats, caught_up)
        hidden = self.hooks.extend_hidden(tuple(inp.request_ids[r] for r in caught_up), extend.target_features,
                                          extend.logits_indices)
        # last_hidden[m]: [num_reqs, H] module m's catch-up output at newest - 1
        last_hidden: list[torch.Tensor] = []
        last_logits_input = None
        previous_out = hidden  # [num_new_total, H] the previous module's catch-up output (unused for module 0)
        for m, module in enumerate(self.modules):
            if m > 0:
                hidden = self._previous_row(inp, caught_up, starts, m - 1, previous_out, extend.logits_indices)
            out = module(extend.input_ids, hidden, extend.md, self.kv_cache, phase="eagle_extend")
            previous_out = out.hidden
            rows_hidden = torch.zeros(num_reqs, out.hidden.shape[-1], dtype=out.hidden.dtype, device=self.device)
            rows_hidden[to_device(caught_up, torch.int64, self.device)] = out.hidden[extend.logits_indices]
            last_hidden.append(rows_hidden)
            if m == 0:
                last_logits_input = out.logits_input[extend.logits_indices]
        if not active:
            return DraftProposal(draft_ids, inp.num_draft_tokens, None)
        extend_row = {r: i for i, r in enumerate(caught_up)}
        active_rows = to_device(active, torch.int64, self.device)
        logits_input = last_logits_input[to_device([extend_row[r] for r in active], torch.int64, self.device)]
        draft_ids[active_rows, 0] = self.argmax_target_ids(logits_input)
        if self._recorder is not None:
            self._record(inp, active, 0, logits_input, draft_ids)
        # step_out: [num_reqs, j, H] the previous step's outputs at positions newest .. newest + j - 1
        step_out = last_hidden[0].new_zeros(num_reqs, 0, last_hidden[0].shape[-1])
        previous = last_hidden[0]  # [num_reqs, H] the previous step's last output
        num_modules = len(self.modules)
        for j in range(1, max_num_draft):
            step_rows = [r for r in active if inp.num_draft_tokens[r] > j]
            rows = to_device(step_rows, torch.int64, self.device)
            if j < num_modules:
                fed = torch.cat([last_hidden[j - 1][rows, None], step_out[rows]], dim=1)  # [n, j, H]
                out_rows, logits_input = self._run_module_step(inp, step_rows, j, draft_ids, fed)
                grown = torch.zeros(num_reqs, j, out_rows.shape[-1], dtype=out_rows.dtype, device=self.device)
                grown[rows] = out_rows
                step_out, last = grown, out_rows[:, -1]
                step_ids = self.argmax_target_ids(logits_input)
            else:
                step = self._build_step(inp, step_rows, j, draft_ids, previous)
                out = self.modules[-1](step.input_ids, step.hidden_states, step.md, self.kv_cache,
                                       phase=f"eagle_step_{j}")
                last, logits_input = out.hidden, out.logits_input
                step_ids = self.argmax_target_ids(logits_input)
            draft_ids[rows, j] = step_ids
            if self._recorder is not None:
                self._record(inp, step_rows, j, logits_input, draft_ids)
            previous = previous.index_copy(0, rows, last)
        return DraftProposal(draft_ids, inp.num_draft_tokens, None)

    def _previous_row(self, inp: ProposeInput, caught_up: list[int], starts: list[int], m: int,
                      previous_out: torch.Tensor, last_rows: torch.Tensor) -> torch.Tensor:
        """Module m + 1's catch-up hidden input: module m's output one row back ([num_new_total, H]); each request's
        first row takes module m's output at its start - 1 from the last round (zero at position 0)."""
        shifted = torch.cat([previous_out[:1], previous_out[:-1]])
        first_rows = torch.cat([last_rows.new_zeros(1), last_rows[:-1] + 1])  # [len(caught_up)]
        width = previous_out.shape[-1]
        firsts = []
        for r, start in zip(caught_up, starts):
            request_id = inp.request_ids[r]
            if start == 0:
                firsts.append(previous_out.new_zeros(width))
                continue
            carry = self._carry.get(request_id)
            if carry is None:
                raise RuntimeError(f"{request_id}: catch-up from position {start} without module {m}'s output at "
                                   f"{start - 1}")
            firsts.append(carry[m])
        shifted[first_rows] = torch.stack(firsts)
        for i, r in enumerate(caught_up):  # module m's last committed row, for the next round
            carry = self._carry.get(inp.request_ids[r])
            if carry is None:
                carry = self._carry[inp.request_ids[r]] = previous_out.new_zeros(len(self.modules) - 1, width)
            carry[m] = previous_out[last_rows[i]]
        return shifted

    def _run_module_step(self, inp: ProposeInput, rows: list[int], j: int, draft_ids: torch.Tensor,
                         fed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Draft step j < num_modules: module j over positions newest .. newest + j - 1 of each request in `rows`
        (tokens draft 1 .. draft j; fed [n, j, H]). Returns (outputs [n, j, H], last rows' logits input [n, H])."""
        newest = [len(inp.token_ids[r]) - 1 for r in rows]
        md = build_metadata(positions=[p + i for p in newest for i in range(j)], num_query=[j] * len(rows),
                            seq_lens=[p + j for p in newest], block_tables=[inp.block_tables[r] for r in rows],
                            block_size=self.block_size, device=self.device)
        row_idx = to_device(rows, torch.int64, self.device)
        input_ids = draft_ids[row_idx, :j].reshape(-1)
        out = self.modules[j](input_ids, fed.reshape(-1, fed.shape[-1]), md, self.kv_cache, phase=f"eagle_step_{j}")
        hidden = out.hidden.view(len(rows), j, -1)
        return hidden, out.logits_input.view(len(rows), j, -1)[:, -1]
