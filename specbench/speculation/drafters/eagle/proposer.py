"""EAGLE-1 / EAGLE-3 proposer: catch-up over target features, then argmax draft-decode steps.

Shift-by-one pairing at draft position p: (token at p + 1, target feature at p), query position p,
p + 1 visible keys. Per round, for a request whose newest committed token sits at position `newest`:
- draft-extend (catch-up) runs over every position with a new target feature, [start, newest - 1],
  writing the draft KV there from target features (overwriting last round's draft-step scratch);
  its last row yields draft 1;
- draft-decode step j (1 <= j < k) feeds (draft j, the head's own hidden of step j - 1) at position
  newest - 1 + j with newest + j visible keys. Its KV is scratch the next catch-up overwrites.
"""

from __future__ import annotations

import torch

from specbench.attention.invariants import check_step_against_requests
from specbench.attention.metadata import build_metadata
from specbench.device_copy import to_device
from specbench.execution_paths import ExecutionPath
from specbench.kv.kv_cache import KVCache, KVCacheSpec
from specbench.runtime.hooks import NO_HOOKS, PhaseHooks
from specbench.runtime.phases import DraftExtendInput, DraftStepInput
from specbench.speculation.capabilities import (
    CapturesDraftGraphs, CapturesTreeDraftGraphs, ConsumesTargetFeatures, DraftsAhead, DraftsTrees, RecordsDraftLogits,
    ResumesFromCachedKV,
)
from specbench.speculation.draft_records import DraftRecorder, DraftStepRecord
from specbench.speculation.drafters.draft_graphs import DraftGraphs
from specbench.speculation.drafters.eagle.loader import LoadedEagleHead
from specbench.speculation.drafters.eagle.ahead import AheadRecording, AheadState
from specbench.speculation.drafters.eagle.round_graph import EagleRoundGraphs
from specbench.speculation.drafters.eagle.tree_round_graph import EagleTreeRoundGraphs
from specbench.speculation.drafters.eagle.round_input import (
    RequestState, RoundFeatures, build_round_input, is_graphable_round,
)
from specbench.speculation.proposer import DraftProposal, ProposeInput
from specbench.speculation.drafters.step_plan import draft_step_metadata
from specbench.speculation.tree.device import block_table_tensor, grow_tree_on_device
from specbench.speculation.tree.step import GrowTree, StepLayout, TreeStepInput
from specbench.speculation.tree.graph import TreeDraftGraphs
from specbench.speculation.tree.plan import TreePlan, tree_reach
from specbench.speculation.tree.records import TreeRoundTrace, tree_trace


class EagleProposer(ResumesFromCachedKV, ConsumesTargetFeatures, DraftsAhead, CapturesDraftGraphs, RecordsDraftLogits,
                    DraftsTrees, CapturesTreeDraftGraphs):
    """EAGLE-1 and EAGLE-3 (one class: the checkpoint's dialect picks the feature layers); `name` is the method."""

    # Draft KV at p came from (target feature p, token p + 1): a block's last position read the next block's first
    # token, so the prefix cache keys a block by that token too (a hit then never needs the target's feature before it).
    draft_kv_lookahead = 1
    # The EAGLE round machinery's paths (MTP runs the target's MTP module through it: a subclass).
    execution_paths = (
        ExecutionPath("eagle.eager", "EAGLE round drafted phase by phase: catch-up, then each draft step "
                      "(speculation/drafters/eagle/proposer.py)", ("cpu", "cuda")),
        ExecutionPath("eagle.step_graph", "EAGLE draft step of a phase-by-phase round replayed from a CUDA graph "
                      "(speculation/drafters/eagle/proposer.py)", ("cuda",), needs_cuda=True),
        ExecutionPath("eagle.fused_head", "draft head's input side on the fused projections: EAGLE-3's fc and "
                      "2H-wide first layer (paired norms, q/k/v + RoPE + K/V store), EAGLE-1's fc, MTP's eh_proj "
                      "(speculation/drafters/eagle/fused_head.py)", ("cuda",)),
        ExecutionPath("eagle.tree_graph", "EAGLE tree draft (root top-k, every draft step over the frontier, the budget "
                      "cut) replayed from one CUDA graph per batch bucket and tree plan, after an eager catch-up "
                      "(speculation/tree/graph.py)", ("cuda",), needs_cuda=True),
        ExecutionPath("eagle.tree_round_graph", "whole EAGLE tree round (catch-up padded to depth + 1, then the tree "
                      "draft) replayed from one CUDA graph per batch bucket and tree plan "
                      "(speculation/drafters/eagle/tree_round_graph.py)", ("cuda",), needs_cuda=True),
        ExecutionPath("eagle.round_graph", "whole EAGLE round replayed from one CUDA graph, input built on the host "
                      "(speculation/drafters/eagle/round_graph.py)", ("cuda",), needs_cuda=True),
    )

    def __init__(self, loaded: LoadedEagleHead, block_size: int, device: torch.device,
                 hooks: PhaseHooks = NO_HOOKS, debug_invariants: bool = False) -> None:
        self.loaded = loaded
        self.head = loaded.head
        self.name = loaded.method
        self.target_feature_layers = loaded.feature_layers
        self.block_size = block_size
        self.device = device
        self.kv_cache: KVCache | None = None
        self._state: dict[str, RequestState] = {}
        self.hooks = hooks
        # The engine's: INV-REQ on every eager draft step; the reference build of graphed and drafted-ahead rounds
        # checked against the device's (round_input.py, ahead.py).
        self.debug_invariants = debug_invariants
        self._recorder: DraftRecorder | None = None  # the draft oracle's (attach_recorder); None = off
        self.draft_graphs = DraftGraphs(hooks)  # draft-step graphs, the graph plan, the pause (draft_graphs.py)
        self.round_graphs: dict[int, EagleRoundGraphs] = {}  # k -> whole-round graphs (unless hooks draft eagerly)
        # plan -> tree round graphs: the whole round, and the tree draft after an eager catch-up
        self.tree_round_graphs: dict[TreePlan, EagleTreeRoundGraphs] = {}
        self.tree_graphs: dict[TreePlan, TreeDraftGraphs] = {}
        self.ahead = AheadState(block_size, device, debug_invariants)  # the round drafted ahead (ahead.py)

    def kv_cache_spec(self) -> KVCacheSpec:
        return self.head.kv_cache_spec()

    def bind_kv_cache(self, kv_cache: KVCache) -> None:
        self.kv_cache = kv_cache

    def _start_round(self, inp: ProposeInput):
        """(draft_ids [num_reqs, max_num_draft] all -1, the requests' new features, rows with new features, rows
        asking for drafts): what every round starts from, whichever way it drafts."""
        assert self.kv_cache is not None, "bind_kv_cache first"
        num_reqs = len(inp.request_ids)
        max_num_draft = max(inp.num_draft_tokens, default=0)
        draft_ids = torch.full((num_reqs, max_num_draft), -1, dtype=torch.int64, device=self.device)
        feats = self._take_features(inp.request_ids)
        caught_up = [r for r in range(num_reqs) if feats.cu_num_new_features[r + 1] > feats.cu_num_new_features[r]]
        active = [r for r in range(num_reqs) if inp.num_draft_tokens[r] > 0]
        missing = set(active) - set(caught_up)
        if missing:
            raise RuntimeError(f"requests {sorted(missing)} asked for drafts without new target features")
        return draft_ids, feats, caught_up, active

    @torch.inference_mode()
    def propose(self, inp: ProposeInput) -> DraftProposal:
        draft_ids, feats, caught_up, active = self._start_round(inp)
        num_reqs, max_num_draft = draft_ids.shape
        if not caught_up:
            return DraftProposal(draft_ids, inp.num_draft_tokens, None)

        graphs = self.round_graphs.get(max_num_draft)
        # a constrained batch drafts step by step: each step's logits are masked on the host (grammar/draft_mask.py)
        if (graphs is not None and not self.hooks.eager_drafting and inp.draft_mask is None
                and is_graphable_round(inp, feats, caught_up, active, graphs)):
            self.head.attn_backend.paths.record("eagle.round_graph")
            states = [self.request_state(request_id) for request_id in inp.request_ids]
            draft_ids.copy_(graphs.run(build_round_input(inp, feats, graphs.query_len, states, self.block_size,
                                                         self.device, with_step_mds=self.debug_invariants)))
            if self._recorder is not None:  # the oracle reads what the graphed round computed
                rows = list(range(num_reqs))
                for j, logits_input in enumerate(graphs.logits_inputs(num_reqs)):
                    self._record(inp, rows, j, logits_input, draft_ids)
            return DraftProposal(draft_ids, inp.num_draft_tokens, None)
        self.head.attn_backend.paths.record("eagle.eager")
        extend = self._build_extend(inp, feats, caught_up)
        extend_hidden = self.head.project_target_features(extend.target_features)  # [num_new_total, H]
        extend_hidden = self.hooks.extend_hidden(tuple(inp.request_ids[r] for r in caught_up), extend_hidden,
                                                 extend.logits_indices)
        out = self.head(extend.input_ids, extend_hidden, extend.md, self.kv_cache, phase="eagle_extend")
        if not active:
            return DraftProposal(draft_ids, inp.num_draft_tokens, None)
        # hidden[r] = the feature the next step of request r is fed  [num_reqs, H]
        hidden = torch.zeros(num_reqs, out.hidden.shape[-1], dtype=out.hidden.dtype, device=self.device)
        rows = to_device(caught_up, torch.int64, self.device)
        hidden[rows] = out.hidden[extend.logits_indices]
        extend_row = {r: i for i, r in enumerate(caught_up)}
        last = extend.logits_indices[to_device([extend_row[r] for r in active], torch.int64, self.device)]
        first_ids = (self.argmax_target_ids(out.logits_input[last]) if inp.draft_mask is None
                     else self._masked_target_ids(inp, 0, active, out.logits_input[last], draft_ids))
        draft_ids[to_device(active, torch.int64, self.device), 0] = first_ids
        if self._recorder is not None:
            self._record(inp, active, 0, out.logits_input[last], draft_ids)

        for j in range(1, max_num_draft):
            step_rows = [r for r in active if inp.num_draft_tokens[r] > j]
            step = self._build_step(inp, step_rows, j, draft_ids, hidden)
            step_hidden, logits_input, step_ids = self._run_step(step)
            if inp.draft_mask is not None:  # the step's argmax again, over the tokens the grammar allows
                step_ids = self._masked_target_ids(inp, j, step_rows, logits_input, draft_ids)
            draft_ids[step.row_of_request, j] = step_ids
            if self._recorder is not None:
                self._record(inp, step_rows, j, logits_input, draft_ids)
            hidden = hidden.index_copy(0, step.row_of_request, step_hidden)
        return DraftProposal(draft_ids, inp.num_draft_tokens, None)  # argmax drafts: deterministic

    @torch.inference_mode()
    def propose_tree(self, inp: ProposeInput, plan: TreePlan) -> DraftProposal:
        """Catch-up over the new target features (the accepted path's, in path order: engine/tree_round.py), whose
        last row gives the root's children; then draft steps over the frontier (speculation/tree/device.py, on the
        device; from CUDA graphs per batch bucket where prepare_tree_draft_graphs captured this plan: the whole
        round, or the draft steps after an eager catch-up too long for it). The committed draft prefix ends before
        the newest token, so step s's queries sit at newest - 1 + s, each fed
        (its token, its parent's hidden: the catch-up's last row for the root's children), and the tree rows are
        stored from newest on: scratch the next catch-up overwrites with the accepted path's own KV. While the oracle's
        recorder is attached the round runs eagerly on the same device code and the recorder gets it whole
        (speculation/tree/records.py)."""
        assert self.kv_cache is not None, "bind_kv_cache first"
        num_reqs = len(inp.request_ids)
        rows = list(range(num_reqs))
        feats = self._take_features(inp.request_ids)
        missing = [r for r in rows if feats.cu_num_new_features[r + 1] == feats.cu_num_new_features[r]]
        if missing:
            raise RuntimeError(f"requests {missing} asked for a tree without new target features")
        prefix_lens = tuple(len(tokens) - 1 for tokens in inp.token_ids)
        prefix = to_device(prefix_lens, torch.int64, self.device)
        block_tables = block_table_tensor(inp.block_tables, self.device)
        round_graphs = self.tree_round_graphs.get(plan)
        is_recording = self._recorder is not None
        # a constrained batch drafts its tree eagerly: each step's log-probs are masked on the host
        # (grammar/tree_draft_mask.py)
        is_masked = inp.draft_mask is not None
        if (round_graphs is not None and not is_masked and self.draft_graphs.replays_trees(is_recording)
                and round_graphs.fits(feats, prefix_lens, block_tables)):
            self.head.attn_backend.paths.record("eagle.tree_round_graph")
            states = [self.request_state(request_id) for request_id in inp.request_ids]
            round_input = build_round_input(inp, feats, round_graphs.query_len, states, self.block_size, self.device,
                                            with_step_mds=False)
            self.head.attn_backend.begin_forward(round_input.extend_md, "eagle_extend")  # the debug invariants
            draft_ids, parents = round_graphs.run(round_input, prefix, block_tables)
            return DraftProposal(draft_ids, (draft_ids.shape[1],) * num_reqs, None, parents)
        extend = self._build_extend(inp, feats, rows)
        extend_hidden = self.head.project_target_features(extend.target_features)
        extend_hidden = self.hooks.extend_hidden(inp.request_ids, extend_hidden, extend.logits_indices)
        out = self.head(extend.input_ids, extend_hidden, extend.md, self.kv_cache, phase="eagle_extend")
        root_hidden = out.hidden[extend.logits_indices]  # [num_reqs, H]
        root_logits_input = out.logits_input[extend.logits_indices]  # [num_reqs, H]
        graphs = self.tree_graphs.get(plan)
        if (graphs is not None and not is_masked and self.draft_graphs.replays_trees(is_recording)
                and graphs.fits(block_tables, prefix_lens)):
            self.head.attn_backend.paths.record("eagle.tree_graph")
            draft_ids, parents = graphs.run((root_hidden, root_logits_input), prefix, block_tables)
        else:
            self.head.attn_backend.paths.record("eagle.eager")
            layout = StepLayout(prefix, block_tables, self.block_size, max(prefix_lens, default=0) + tree_reach(plan),
                                prefix_lens=prefix_lens, read_back=self.debug_invariants)
            draft_ids, parents = self.draft_tree(plan, root_hidden, root_logits_input, layout, grow_tree_on_device,
                                                 trace=None if is_masked else tree_trace(self._recorder, inp, plan),
                                                 draft_mask=inp.draft_mask)
        return DraftProposal(draft_ids, (draft_ids.shape[1],) * num_reqs, None, parents)

    def draft_tree(self, plan: TreePlan, root_hidden: torch.Tensor, root_logits_input: torch.Tensor,
                   layout: StepLayout, grow: GrowTree, check_metadata: bool = True,
                   trace: TreeRoundTrace | None = None, draft_mask=None) -> tuple[torch.Tensor, torch.Tensor]:
        """(draft ids [num_reqs, num_kept] in the target's vocabulary, parents [num_reqs, num_kept]) of the trees
        grown from the root rows (root_hidden, root_logits_input: [num_reqs, H], the catch-up's last rows). With the
        device `grow` and no `trace` (the oracle's, eager rounds only) nothing here syncs: eager rounds and the tree
        graphs (speculation/tree/graph.py) run this same code. `draft_mask` (grammar/tree_draft_mask.py, eager
        rounds of a constrained batch): every node's log-probs masked by its path's grammar state (host reads)."""
        num_reqs, width = root_hidden.shape
        # per tree row the head's hidden output (what the row's children are fed)
        fed_hidden = root_hidden.new_zeros(num_reqs, max(1, (plan.depth - 1) * plan.topk), width)

        def run_step(step: TreeStepInput) -> torch.Tensor:
            num_frontier = step.frontier.token_ids.shape[1]
            parent_row = step.parent_row  # [num_reqs, F]
            from_rows = fed_hidden.gather(1, parent_row.clamp_min(0)[..., None].expand(-1, -1, width))
            hidden = torch.where(parent_row[..., None] < 0, root_hidden[:, None], from_rows)  # [num_reqs, F, H]
            token_ids = self.head.to_target_ids(step.frontier.token_ids.reshape(-1))
            step_out = self.head(token_ids, hidden.reshape(-1, width), step.md, self.kv_cache,
                                 phase=f"eagle_tree_step_{step.step}", check_metadata=check_metadata)
            fed_hidden[:, step.first_row: step.first_row + num_frontier] = step_out.hidden.view(
                num_reqs, num_frontier, width)
            logits = self.head.compute_logits(step_out.logits_input)
            return torch.log_softmax(logits, dim=-1).view(num_reqs, num_frontier, -1)

        root_log_probs = torch.log_softmax(self.head.compute_logits(root_logits_input), dim=-1)
        step_fn = run_step
        if draft_mask is not None:
            to_target = self.head.to_target_ids
            root_log_probs = draft_mask.root(root_log_probs, to_target)

            def step_fn(step: TreeStepInput) -> torch.Tensor:
                return draft_mask.step(step.frontier, run_step(step), to_target)

        grown = grow(plan, root_log_probs, layout, step_fn, trace)
        draft_ids = self.head.to_target_ids(grown.token_ids.reshape(-1)).view(grown.token_ids.shape)
        return draft_ids, grown.parent

    def prepare_tree_draft_graphs(self, plan: TreePlan) -> None:
        """Capture the tree rounds of `plan` for every batch bucket, once per plan (a no-op until CUDA graphs are
        enabled, for a plan without draft steps, or for hooks that draft phase by phase): the whole round with its
        catch-up (tree_round_graph.py), and the tree draft alone for rounds whose catch-up is longer."""
        if not self.draft_graphs.captures_tree(plan, self.tree_graphs):
            return

        def draft(roots, layout):
            return self.draft_tree(plan, *roots, layout, grow_tree_on_device, check_metadata=False)

        # one pool for both: they replay one at a time and their outputs are copied out at once
        graph_plan = self.draft_graphs.plan
        pool = torch.cuda.graph_pool_handle() if graph_plan.device.type == "cuda" else None
        graphs = TreeDraftGraphs(draft, plan, graph_plan, num_roots=2,
                                 root_width=self.head.config.layer.hidden_size, root_dtype=self.head.dtype,
                                 paths=self.head.attn_backend.paths, pool=pool)
        round_graphs = EagleTreeRoundGraphs(self, plan, graph_plan, pool=pool)
        round_graphs.graphs.capture()
        graphs.capture()
        self.tree_graphs[plan] = graphs
        self.tree_round_graphs[plan] = round_graphs

    def on_tree_verified(self, request_ids: tuple[str, ...], accepted_nodes: tuple[tuple[int, ...], ...]) -> None:
        """Nothing to do: the engine hands over the accepted path's target features (root first, in path order), so
        the next catch-up rewrites the path's draft KV from them and never sees a rejected branch."""

    def propose_ahead(self, request_ids: tuple[str, ...], newest_positions: tuple[int, ...],
                      block_tables: tuple[tuple[int, ...], ...], verify_token_ids: torch.Tensor,
                      num_accepted: torch.Tensor, target_features: torch.Tensor | None) -> torch.Tensor | None:
        """The next round's drafts, built on the device from a verify the host has not read (ahead.py), or None:
        no whole-round graph for this k, or hooks that draft phase by phase."""
        graphs = self.round_graphs.get(verify_token_ids.shape[1] - 1)
        if graphs is None or self.hooks.eager_drafting:
            return None
        return self.ahead.propose(graphs, [self.request_state(request_id) for request_id in request_ids],
                                  newest_positions, block_tables, verify_token_ids, num_accepted, target_features,
                                  is_recording=self.is_recording)

    def confirm_ahead(self, inp: ProposeInput, verify_features: torch.Tensor, num_accepted: tuple[int, ...],
                      rows_of_request: tuple[int, ...]) -> None:
        recording = self.ahead.take_recording()
        if recording is not None and inp.request_ids:
            self._record_ahead(recording, inp, rows_of_request)
        self.ahead.confirm(inp, [self.request_state(request_id) for request_id in inp.request_ids], verify_features,
                           num_accepted, rows_of_request)

    def _record_ahead(self, recording: AheadRecording, inp: ProposeInput, rows_of_request: tuple[int, ...]) -> None:
        """The recorded round drafted ahead, for the requests of `inp` (rows `rows_of_request` of its batch)."""
        rows = to_device(rows_of_request, torch.int64, self.device)
        draft_ids = recording.draft_ids.index_select(0, rows)  # [len(inp), k], in inp's order
        for j, logits_input in enumerate(recording.logits_inputs):
            self._record(inp, list(range(len(rows_of_request))), j, logits_input.index_select(0, rows), draft_ids)

    def _masked_target_ids(self, inp: ProposeInput, step: int, rows: list[int], logits_input: torch.Tensor,
                           draft_ids: torch.Tensor) -> torch.Tensor:  # [n] target ids
        """Draft step `step`'s argmax over the target ids each constrained request's grammar allows: the head's logits
        laid out over the target vocabulary (a reduced draft vocabulary maps through d2t), then masked."""
        draft_logits = self.head.compute_logits(logits_input).float()  # [n, draft_vocab]
        if self.head.draft_to_target is not None:
            target_logits = torch.full((draft_logits.shape[0], inp.draft_mask.vocab_size), float("-inf"),
                                       device=draft_logits.device)
            target_logits[:, self.head.draft_to_target] = draft_logits
        else:
            target_logits = draft_logits
        return inp.draft_mask.masked(step, rows, target_logits, draft_ids).argmax(dim=-1)

    def argmax_target_ids(self, logits_input: torch.Tensor) -> torch.Tensor:  # [n, H] -> [n] target ids
        return self.head.to_target_ids(self.head.compute_logits(logits_input).argmax(dim=-1))

    def _step_forward(self, step_input_ids, hidden, md, phase: str, check_metadata: bool = True):
        out = self.head(step_input_ids, hidden, md, self.kv_cache, phase=phase, check_metadata=check_metadata)
        return out.hidden, out.logits_input, self.argmax_target_ids(out.logits_input)

    def _run_step(self, step: DraftStepInput) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(next hidden [n, H], logits input [n, H], draft ids [n]) of one draft-decode step."""
        where = f"eagle_step_{step.step}"
        return self.draft_graphs.run_step(
            step.md, step.input_ids, step.hidden_states,
            lambda: self._step_forward(step.input_ids, step.hidden_states, step.md, where),
            where=where, paths=self.head.attn_backend.paths, graph_path="eagle.step_graph")

    def enable_cuda_graphs(self, plan) -> None:
        """Capture draft-decode steps (one query per request) for every batch bucket of `plan` (a GraphPlan)."""
        self.head.rotary.reserve(plan.max_positions, plan.device)

        def forward(input_ids, md, hidden):
            return self._step_forward(input_ids, hidden, md, "eagle_step", check_metadata=False)

        self.draft_graphs.enable(plan, forward, name="eagle_step", check_metadata=self.head.attn_backend.begin_forward,
                                 paths=self.head.attn_backend.paths, hidden_size=self.head.config.layer.hidden_size,
                                 hidden_dtype=self.head.dtype)

    def pause_step_graphs(self, is_paused: bool) -> None:
        self.draft_graphs.pause(is_paused)  # tree rounds draft eagerly too while paused (their graphs are kept)

    def _build_extend(self, inp: ProposeInput, feats: RoundFeatures, caught_up: list[int]) -> DraftExtendInput:
        input_ids: list[int] = []
        positions: list[int] = []
        num_query: list[int] = []
        last_rows: list[int] = []
        for r in caught_up:
            request_id, tokens = inp.request_ids[r], inp.token_ids[r]
            start = feats.new_feature_start[r]
            num_new = feats.cu_num_new_features[r + 1] - feats.cu_num_new_features[r]
            state = self.request_state(request_id)
            # Catch-up resumes exactly where committed draft KV ends and stops before the newest token:
            # it never sees a rejected or not-yet-committed position.
            if start != state.num_committed or start + num_new != len(tokens) - 1:
                raise RuntimeError(
                    f"{request_id}: features for positions [{start}, {start + num_new}) but draft KV is committed "
                    f"up to {state.num_committed} and the newest token is at {len(tokens) - 1}"
                )
            input_ids.extend(tokens[start + 1 : start + num_new + 1])  # token at p + 1 pairs with feature p
            positions.extend(range(start, start + num_new))
            num_query.append(num_new)
            last_rows.append(len(input_ids) - 1)
            state.num_committed = start + num_new
        block_tables = [inp.block_tables[r] for r in caught_up]
        seq_lens = self.hooks.extend_seq_lens(
            tuple(inp.request_ids[r] for r in caught_up),
            [feats.new_feature_start[r] + n for r, n in zip(caught_up, num_query)], block_tables, self.block_size,
        )
        md = build_metadata(
            positions=positions,
            num_query=num_query,
            seq_lens=seq_lens,
            block_tables=block_tables,
            block_size=self.block_size,
            device=self.device,
        )
        assert feats.new_features is not None and feats.new_features.shape[0] == len(input_ids)
        return DraftExtendInput(
            input_ids=to_device(input_ids, torch.int64, self.device),
            md=self.hooks.extend_metadata(md),
            target_features=feats.new_features,
            logits_indices=to_device(last_rows, torch.int64, self.device),
        )

    def _build_step(
        self, inp: ProposeInput, rows: list[int], j: int, draft_ids: torch.Tensor, hidden: torch.Tensor
    ) -> DraftStepInput:
        # Draft token j is paired with the head's own hidden at position newest - 1 + j (step 1 at newest).
        md = draft_step_metadata(
            first_positions=[len(inp.token_ids[r]) - 1 for r in rows],
            step=j,
            block_tables=[inp.block_tables[r] for r in rows],
            block_size=self.block_size,
            device=self.device,
            hooks=self.hooks,
        )
        row_idx = to_device(rows, torch.int64, self.device)
        step_hidden = hidden[row_idx]
        md = self.hooks.step_metadata(j, tuple(inp.request_ids[r] for r in rows), md, step_hidden)
        if self.debug_invariants:  # step j's query sits at newest + j - 1, newest = committed length - 1
            check_step_against_requests(md, [len(inp.token_ids[r]) - 2 + j for r in rows],
                                        [inp.block_tables[r] for r in rows], f"eagle draft step {j}")
        return DraftStepInput(
            step=j, input_ids=draft_ids[row_idx, j - 1], md=md, hidden_states=step_hidden, row_of_request=row_idx
        )

    def prepare_cuda_graphs(self, num_steps: int) -> None:
        """Capture whole-round graphs for k = num_steps (once per k; a no-op until graphs are enabled)."""
        if self.draft_graphs.plan is None or num_steps < 1 or num_steps in self.round_graphs:
            return
        graphs = EagleRoundGraphs(self, num_steps, self.draft_graphs.plan, self.head.attn_backend.begin_forward)
        graphs.capture()
        self.round_graphs[num_steps] = graphs

    @property
    def is_recording(self) -> bool:
        return self._recorder is not None

    def attach_recorder(self, recorder: DraftRecorder | None) -> None:
        """Record every draft step from now on, on whichever path drafts it: eager steps, whole-round graphs and
        rounds drafted ahead (read back from the round's outputs), so the oracle checks the path production runs.
        Tree rounds skip their graphs while recording: their draft runs eagerly on the device code the graphs
        captured, traced step by step (propose_tree, speculation/tree/records.py)."""
        self._recorder = recorder

    def _record(self, inp: ProposeInput, rows: list[int], j: int, logits_input: torch.Tensor, draft_ids) -> None:
        """Step j of requests `rows` of `inp`; logits_input [len(rows), H], draft_ids [>= max(rows) + 1, >= j]."""
        logits = self.head.compute_logits(logits_input)
        drafts = draft_ids[to_device(rows, torch.int64, self.device), :j].tolist()  # host sync: oracle only
        for i, r in enumerate(rows):
            self._recorder.record(
                DraftStepRecord(inp.request_ids[r], j, tuple(inp.token_ids[r]) + tuple(drafts[i]), logits[i].float().cpu())
            )

    def add_target_features(self, request_id: str, start: int, features: torch.Tensor) -> None:
        """Features [n, feature_dim] of positions [start, start + n), appended to what the next catch-up consumes."""
        state = self.request_state(request_id)
        if state.pending_features is None:
            state.pending_features, state.pending_start = features, start
        else:
            # Appended features must continue the pending ones (a prompt's chunks, engine/mixed_step.py): a gap or
            # an overlap would feed the catch-up rows at the wrong positions.
            expected = state.pending_start + state.pending_features.shape[0]
            if start != expected:
                raise RuntimeError(f"{request_id}: target features handed at position {start}, the pending ones "
                                   f"end at {expected}")
            state.pending_features = torch.cat([state.pending_features, features])

    def _take_features(self, request_ids: tuple[str, ...]) -> RoundFeatures:
        """This round's features of each request, handed over once (the catch-up consumes them)."""
        chunks: list[torch.Tensor] = []
        cu, starts = [0], []
        for request_id in request_ids:
            state = self.request_state(request_id)
            chunk, state.pending_features = state.pending_features, None
            cu.append(cu[-1] + (0 if chunk is None else chunk.shape[0]))
            starts.append(state.pending_start)
            if chunk is not None:
                chunks.append(chunk)
        return RoundFeatures(torch.cat(chunks) if chunks else None, tuple(cu), tuple(starts))

    def request_state(self, request_id: str) -> RequestState:
        """This request's drafting state (created on its first round; free() drops it)."""
        return self._state.setdefault(request_id, RequestState())

    def on_verified(self, request_ids: tuple[str, ...], num_accepted: tuple[int, ...]) -> None:
        """Nothing to do: the next round's target features say which positions were committed."""

    def num_final_draft_kv(self, request_id: str) -> int:
        state = self._state.get(request_id)
        return 0 if state is None else state.num_committed  # the catch-up writes from there on

    def resume_at(self, request_id: str, num_cached_tokens: int) -> None:
        self._state[request_id] = RequestState(num_committed=num_cached_tokens, pending_start=num_cached_tokens)

    def free(self, request_id: str) -> None:
        self._state.pop(request_id, None)

    def describe(self) -> dict[str, object]:
        return self.loaded.describe()


def load_eagle_proposer(ctx, method: str) -> EagleProposer:
    from specbench.errors import SpecbenchError
    from specbench.speculation.drafters.eagle.loader import load_eagle_head

    cfg = ctx.config
    if not cfg.draft:
        raise SpecbenchError(f"method {method!r} needs --draft (the EAGLE head's directory or hub id)")
    loaded = load_eagle_head(
        cfg.draft,
        method=method,
        target=ctx.target,
        aux_override=None if cfg.eagle_aux_layer_ids is None else tuple(cfg.eagle_aux_layer_ids),
        aux_convention=cfg.eagle_aux_convention,
        attn_backend=ctx.attn_backend,
        dtype=ctx.dtype,
        device=ctx.device,
        allow_pickle=cfg.allow_pickle,
        fused_kernels=cfg.fused_kernels,
    )
    return EagleProposer(loaded, cfg.block_size, ctx.device, ctx.hooks, debug_invariants=cfg.debug_invariants)
