"""Draft-LM proposer: a small LM with the target's tokenizer and its own paged KV.

Per round, for a request whose newest token sits at position `newest`:
- draft-extend (catch-up) feeds every committed token the draft has not seen,
  positions [num_cached, newest], and drafts token 1 from the last row;
- draft-decode step j (1 <= j < n) feeds draft j at position newest + j.
Draft KV written for accepted drafts is kept (same tokens, same prefix); after
full acceptance the last draft was never fed, so the next catch-up feeds it
together with the bonus token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.attention.invariants import check_step_against_requests
from specbench.attention.metadata import build_metadata, slot_of
from specbench.device_copy import to_device
from specbench.errors import SpecbenchError
from specbench.execution_paths import ExecutionPath
from specbench.kv.kv_cache import KVCache, KVCacheSpec
from specbench.models.vocab import check_draft_vocab, check_tokenizer_fits
from specbench.runtime.hooks import NO_HOOKS, PhaseHooks
from specbench.runtime.phases import DraftExtendInput, DraftStepInput
from specbench.speculation.capabilities import (
    CapturesDraftGraphs, CapturesTreeDraftGraphs, DraftsTrees, RecordsDraftLogits, ResumesFromCachedKV,
)
from specbench.speculation.draft_records import DraftRecorder, DraftStepRecord
from specbench.speculation.drafters.draft_graphs import DraftGraphs
from specbench.speculation.proposer import DraftProposal, ProposeInput
from specbench.speculation.sampling import SamplingTensors, logits_to_probs, sample_from_probs
from specbench.speculation.drafters.step_plan import draft_step_metadata
from specbench.speculation.tree.kv import move_slots
from specbench.speculation.tree.device import block_table_tensor, grow_tree_on_device
from specbench.speculation.tree.step import GrowTree, GrownTree, StepLayout, TreeStepInput
from specbench.speculation.tree.graph import TreeDraftGraphs
from specbench.speculation.tree.plan import TreePlan, tree_reach
from specbench.speculation.tree.records import TreeRoundTrace, tree_trace


@dataclass(frozen=True)
class _TreeRound:
    """What on_tree_verified needs of a request's last tree round."""

    fed_row: torch.Tensor  # [num_reqs, num_nodes] int64 the round's: tree row a draft step fed each node at, -1 = never
    row: int  # this request's row of fed_row
    block_table: tuple[int, ...]


@dataclass
class _DraftState:
    num_cached: int = 0  # draft KV valid for positions [0, num_cached)
    num_written: int = 0  # positions [0, num_written) written in the last round
    newest: int = 0  # position of the newest committed token at the last propose
    tree_round: _TreeRound | None = None  # set by propose_tree until on_tree_verified


def _select(st: SamplingTensors, rows: list[int]) -> SamplingTensors:
    idx = to_device(rows, torch.int64, st.temperature.device)
    return SamplingTensors(
        temperature=st.temperature[idx],
        top_k=st.top_k[idx],
        top_p=st.top_p[idx],
        is_greedy=st.is_greedy[idx],
        generators=tuple(st.generators[r] for r in rows),
        all_greedy=st.all_greedy,
        is_greedy_cpu=None if st.is_greedy_cpu is None else tuple(st.is_greedy_cpu[r] for r in rows),
    )


class DraftModelProposer(ResumesFromCachedKV, CapturesDraftGraphs, RecordsDraftLogits, DraftsTrees,
                         CapturesTreeDraftGraphs):
    name = "draft"
    draft_kv_lookahead = 0  # draft KV at p reads tokens <= p only
    execution_paths = (
        ExecutionPath("draft.eager_step", "draft-LM draft step run eagerly (speculation/drafters/draft_model.py)",
                      ("cpu",)),
        ExecutionPath("draft.step_graph", "draft-LM draft step replayed from a CUDA graph "
                      "(speculation/drafters/draft_model.py)", ("cuda",), needs_cuda=True),
        ExecutionPath("draft.tree_graph", "draft-LM tree draft (root top-k, every draft step over the frontier, the "
                      "budget cut) replayed from one CUDA graph per batch bucket and tree plan, after an eager "
                      "catch-up (speculation/tree/graph.py)", ("cuda",), needs_cuda=True),
    )

    def __init__(self, model, target_vocab_size: int, block_size: int, device: torch.device,
                 hooks: PhaseHooks = NO_HOOKS, debug_invariants: bool = False) -> None:
        self.model = model
        self.target_vocab_size = target_vocab_size
        self.block_size = block_size
        self.device = device
        self.kv_cache: KVCache | None = None
        self._state: dict[str, _DraftState] = {}
        self.hooks = hooks
        self._recorder: DraftRecorder | None = None  # the draft oracle's (attach_recorder); None = off
        self.draft_graphs = DraftGraphs(hooks)  # draft-step graphs, the graph plan, the pause (draft_graphs.py)
        self.debug_invariants = debug_invariants  # the engine's: INV-REQ on every draft step
        self.tree_graphs: dict[TreePlan, TreeDraftGraphs] = {}  # plan -> tree draft graphs (prepare_tree_draft_graphs)

    def kv_cache_spec(self) -> KVCacheSpec:
        return self.model.kv_cache_spec()

    def bind_kv_cache(self, kv_cache: KVCache) -> None:
        self.kv_cache = kv_cache

    def _draft_tokens(self, logits: torch.Tensor, st: SamplingTensors) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Returns draft ids [n] and, unless every request is greedy, the draft probs [n, target_vocab]."""
        if st.all_greedy:
            return logits.argmax(dim=-1), None
        probs = logits_to_probs(logits, st.temperature, st.top_k, st.top_p)
        ids = torch.where(st.is_greedy, logits.argmax(dim=-1), sample_from_probs(probs, st.generators))
        return ids, self.hooks.draft_probs(logits, probs)  # the draft's vocabulary is the target's (checked at load)

    @torch.inference_mode()
    def propose(self, inp: ProposeInput) -> DraftProposal:
        assert self.kv_cache is not None, "bind_kv_cache first"
        num_reqs = len(inp.request_ids)
        max_num_draft = max(inp.num_draft_tokens, default=0)
        draft_ids = torch.full((num_reqs, max_num_draft), -1, dtype=torch.int64, device=self.device)
        draft_probs = None
        active = [r for r in range(num_reqs) if inp.num_draft_tokens[r] > 0]
        if not active:
            return DraftProposal(draft_ids, inp.num_draft_tokens, None)

        extend = self._build_extend(inp, active)
        out = self.model(extend.input_ids, extend.md, self.kv_cache, phase="draft_extend")
        logits = self.model.compute_logits(out.hidden_states[extend.logits_indices])
        if self._recorder is not None:
            self._record(inp, active, 0, logits, draft_ids)
        if inp.draft_mask is not None:  # after the recorder: the oracle replays the drafter's own distribution
            logits = inp.draft_mask.masked(0, active, logits, draft_ids)
        st = _select(inp.sampling, active)
        ids, probs = self._draft_tokens(logits, st)
        rows = to_device(active, torch.int64, self.device)
        draft_ids[rows, 0] = ids
        if probs is not None:
            draft_probs = torch.zeros(num_reqs, max_num_draft, self.target_vocab_size, device=self.device)
            draft_probs[rows, 0] = probs

        for j in range(1, max_num_draft):
            step_rows = [r for r in active if inp.num_draft_tokens[r] > j]
            step = self._build_step(inp, step_rows, j, draft_ids)
            logits = self._step_logits(step)
            if self._recorder is not None:
                self._record(inp, step_rows, j, logits, draft_ids)
            if inp.draft_mask is not None:
                logits = inp.draft_mask.masked(j, step_rows, logits, draft_ids)
            ids, probs = self._draft_tokens(logits, _select(inp.sampling, step_rows))
            draft_ids[step.row_of_request, j] = ids
            if probs is not None:
                draft_probs[step.row_of_request, j] = probs

        for r in active:
            state = self._state[inp.request_ids[r]]
            state.newest = len(inp.token_ids[r]) - 1
            state.num_written = state.newest + inp.num_draft_tokens[r]
        return DraftProposal(draft_ids, inp.num_draft_tokens, draft_probs)

    @torch.inference_mode()
    def propose_tree(self, inp: ProposeInput, plan: TreePlan) -> DraftProposal:
        """Catch-up as for a chain (its last row gives the root's children), then draft steps over the frontier on
        the device (speculation/tree/device.py: no host sync per step), from one CUDA graph per batch bucket where
        prepare_tree_draft_graphs captured this plan (speculation/tree/graph.py): the committed prefix ends at the
        newest token, so step s's queries sit at newest + s and the tree rows are stored from newest + 1 on. While
        the oracle's recorder is attached the round runs eagerly on the same device code and the recorder gets it
        whole (speculation/tree/records.py)."""
        assert self.kv_cache is not None, "bind_kv_cache first"
        rows = list(range(len(inp.request_ids)))
        extend = self._build_extend(inp, rows)
        out = self.model(extend.input_ids, extend.md, self.kv_cache, phase="draft_extend")
        root_hidden = out.hidden_states[extend.logits_indices]  # [num_reqs, H]
        prefix_lens = tuple(len(tokens) for tokens in inp.token_ids)
        prefix = to_device(prefix_lens, torch.int64, self.device)
        block_tables = block_table_tensor(inp.block_tables, self.device)
        graphs = self.tree_graphs.get(plan)
        paths = self.model.attn_backend.paths
        # a constrained batch drafts its tree eagerly, each step masked on the host (grammar/tree_draft_mask.py)
        is_masked = inp.draft_mask is not None
        is_replayed = (graphs is not None and not is_masked
                       and self.draft_graphs.replays_trees(self._recorder is not None))
        if is_replayed and graphs.fits(block_tables, prefix_lens):
            paths.record("draft.tree_graph")
            grown = GrownTree(*graphs.run((root_hidden,), prefix, block_tables))
        else:
            if plan.depth > 1:
                paths.record("draft.eager_step")
            layout = StepLayout(prefix, block_tables, self.block_size, max(prefix_lens, default=0) + tree_reach(plan),
                                prefix_lens=prefix_lens, read_back=self.debug_invariants)
            grown = self.draft_tree(plan, root_hidden, layout, grow_tree_on_device,
                                    trace=None if is_masked else tree_trace(self._recorder, inp, plan),
                                    draft_mask=inp.draft_mask)
        for r in rows:
            state = self._state[inp.request_ids[r]]
            state.newest = len(inp.token_ids[r]) - 1
            state.num_written = state.newest + 1  # tree rows are not at their positions until on_tree_verified
            state.tree_round = _TreeRound(grown.fed_row, r, inp.block_tables[r])
        num_kept = grown.token_ids.shape[1]
        return DraftProposal(grown.token_ids, (num_kept,) * len(rows), None, grown.parent)

    def draft_tree(self, plan: TreePlan, root_hidden: torch.Tensor, layout: StepLayout, grow: GrowTree,
                   check_metadata: bool = True, trace: TreeRoundTrace | None = None, draft_mask=None) -> GrownTree:
        """The trees grown from the catch-up's last rows (root_hidden [num_reqs, H]); with the device `grow` and no
        `trace` (the oracle's, eager rounds only) nothing here syncs: eager rounds and the tree graphs run this same
        code. `draft_mask` (grammar/tree_draft_mask.py, eager rounds of a constrained batch): every node's
        log-probs masked by its path's grammar state (host reads)."""
        num_reqs = root_hidden.shape[0]

        def run_step(step: TreeStepInput) -> torch.Tensor:
            num_frontier = step.frontier.token_ids.shape[1]
            step_out = self.model(step.frontier.token_ids.reshape(-1), step.md, self.kv_cache,
                                  phase=f"draft_tree_step_{step.step}", check_metadata=check_metadata)
            logits = self.model.compute_logits(step_out.hidden_states)
            return self._log_probs(logits).view(num_reqs, num_frontier, -1)

        root_log_probs = self._log_probs(self.model.compute_logits(root_hidden))
        if draft_mask is None:
            return grow(plan, root_log_probs, layout, run_step, trace)

        def masked_step(step: TreeStepInput) -> torch.Tensor:
            return draft_mask.step(step.frontier, run_step(step))

        return grow(plan, draft_mask.root(root_log_probs), layout, masked_step, trace)

    def prepare_tree_draft_graphs(self, plan: TreePlan) -> None:
        """Capture the tree draft of `plan` for every batch bucket (once per plan; a no-op until CUDA graphs are
        enabled, for a plan without draft steps, or for hooks that draft phase by phase)."""
        if not self.draft_graphs.captures_tree(plan, self.tree_graphs):
            return

        def draft(roots, layout):
            grown = self.draft_tree(plan, roots[0], layout, grow_tree_on_device, check_metadata=False)
            return grown.token_ids, grown.parent, grown.fed_row

        graphs = TreeDraftGraphs(draft, plan, self.draft_graphs.plan, num_roots=1,
                                 root_width=self.model.config.hidden_size, root_dtype=self.model.dtype,
                                 paths=self.model.attn_backend.paths)
        graphs.capture()
        self.tree_graphs[plan] = graphs

    def _log_probs(self, logits: torch.Tensor) -> torch.Tensor:  # [..., draft_vocab] -> [..., target_vocab]
        """Children are the top-k of the raw draft distribution over the target's ids (the verifier's deterministic
        rule is lossless for any such choice)."""
        return torch.log_softmax(logits[..., : self.target_vocab_size].float(), dim=-1)

    def on_tree_verified(self, request_ids: tuple[str, ...], accepted_nodes: tuple[tuple[int, ...], ...]) -> None:
        """Move the accepted path's draft KV from its tree rows to its positions (the rows a draft step fed: all but
        the deepest level, which was never fed) and commit it; the next catch-up feeds the rest of the path and the
        bonus. A fed row saw the prefix and its ancestors at its branch position: the KV a chain along it writes."""
        src_slots, dst_slots = [], []
        fed_rows: dict[int, list[list[int]]] = {}  # id(round's fed_row) -> its rows on the host: one read per round
        for request_id, path in zip(request_ids, accepted_nodes):
            state = self._state.get(request_id)
            if state is None or state.tree_round is None:
                continue
            tree_round, state.tree_round = state.tree_round, None
            key = id(tree_round.fed_row)
            if key not in fed_rows:
                fed_rows[key] = tree_round.fed_row.tolist()  # after the verify's sync: no stall
            fed_row = fed_rows[key][tree_round.row]
            prefix = state.newest + 1  # tree row i was stored at prefix + i
            num_kept = 0
            for depth, node in enumerate(path):
                row = fed_row[node]
                if row < 0:  # never fed (the deepest level, or not in a frontier): the catch-up feeds it
                    break
                src_slots.append(slot_of(tree_round.block_table, prefix + row, self.block_size))
                dst_slots.append(slot_of(tree_round.block_table, prefix + depth, self.block_size))
                num_kept += 1
            state.num_cached = state.num_written = prefix + num_kept
        if src_slots:
            src = to_device(src_slots, torch.int64, self.device)
            dst = to_device(dst_slots, torch.int64, self.device)
            for layer in range(len(self.kv_cache.k)):
                for cache in self.kv_cache.flat(layer):
                    move_slots(cache, src, dst)

    def _build_extend(self, inp: ProposeInput, active: list[int]) -> DraftExtendInput:
        input_ids: list[int] = []
        positions: list[int] = []
        num_query: list[int] = []
        seq_lens: list[int] = []
        last_rows: list[int] = []
        for r in active:
            state = self._state.setdefault(inp.request_ids[r], _DraftState())
            tokens = inp.token_ids[r]
            input_ids.extend(tokens[state.num_cached :])
            positions.extend(range(state.num_cached, len(tokens)))
            num_query.append(len(tokens) - state.num_cached)
            seq_lens.append(len(tokens))
            last_rows.append(len(input_ids) - 1)
        request_ids = tuple(inp.request_ids[r] for r in active)
        block_tables = [inp.block_tables[r] for r in active]
        seq_lens = self.hooks.extend_seq_lens(request_ids, seq_lens, block_tables, self.block_size)
        md = build_metadata(
            positions=positions,
            num_query=num_query,
            seq_lens=seq_lens,
            block_tables=block_tables,
            block_size=self.block_size,
            device=self.device,
        )
        return DraftExtendInput(
            input_ids=to_device(input_ids, torch.int64, self.device),
            md=self.hooks.extend_metadata(md),
            target_features=None,
            logits_indices=to_device(last_rows, torch.int64, self.device),
        )

    def _build_step(self, inp: ProposeInput, rows: list[int], j: int, draft_ids: torch.Tensor) -> DraftStepInput:
        # Draft token j sits at position newest + j: step 1's query is at newest + 1.
        md = draft_step_metadata(
            first_positions=[len(inp.token_ids[r]) for r in rows],
            step=j,
            block_tables=[inp.block_tables[r] for r in rows],
            block_size=self.block_size,
            device=self.device,
            hooks=self.hooks,
        )
        md = self.hooks.step_metadata(j, tuple(inp.request_ids[r] for r in rows), md, None)
        if self.debug_invariants:  # step j's query sits at newest + j, newest = committed length - 1
            check_step_against_requests(md, [len(inp.token_ids[r]) - 1 + j for r in rows],
                                        [inp.block_tables[r] for r in rows], f"draft step {j}")
        row_idx = to_device(rows, torch.int64, self.device)
        return DraftStepInput(step=j, input_ids=draft_ids[row_idx, j - 1], md=md, hidden_states=None, row_of_request=row_idx)

    def _step_logits(self, step: DraftStepInput) -> torch.Tensor:  # [num_reqs_in_step, draft_vocab] fp32
        paths = self.model.attn_backend.paths

        def eager() -> tuple[torch.Tensor]:
            paths.record("draft.eager_step")
            out = self.model(step.input_ids, step.md, self.kv_cache, phase=f"draft_step_{step.step}")
            return (self.model.compute_logits(out.hidden_states),)

        return self.draft_graphs.run_step(step.md, step.input_ids, None, eager, where=f"draft_step_{step.step}",
                                          paths=paths, graph_path="draft.step_graph")[0]

    def enable_cuda_graphs(self, plan) -> None:
        """Capture draft-decode steps (one query per request) for every batch bucket of `plan` (a GraphPlan)."""
        self.model.reserve_rope(plan.max_positions, plan.device)

        def forward(input_ids, md, hidden):
            out = self.model(input_ids, md, self.kv_cache, phase="draft_step", check_metadata=False)
            return (self.model.compute_logits(out.hidden_states),)

        self.draft_graphs.enable(plan, forward, name="draft_step",
                                 check_metadata=self.model.attn_backend.begin_forward,
                                 paths=self.model.attn_backend.paths)

    def prepare_cuda_graphs(self, num_steps: int) -> None:
        """Nothing per k: every draft-decode step is one query per request, captured by enable_cuda_graphs."""

    def pause_step_graphs(self, is_paused: bool) -> None:
        self.draft_graphs.pause(is_paused)  # tree rounds draft eagerly too while paused (their graphs are kept)

    def attach_recorder(self, recorder: DraftRecorder | None) -> None:
        """Chain steps are recorded on whichever path drafts them (step graphs included); tree rounds skip their
        graphs while recording: their draft runs eagerly on the device code the graphs captured, traced step by step
        (propose_tree, speculation/tree/records.py)."""
        self._recorder = recorder

    def _record(self, inp: ProposeInput, rows: list[int], j: int, logits: torch.Tensor, draft_ids) -> None:
        drafts = draft_ids[to_device(rows, torch.int64, self.device), :j].tolist()  # host sync: oracle only
        for i, r in enumerate(rows):
            self._recorder.record(
                DraftStepRecord(inp.request_ids[r], j, tuple(inp.token_ids[r]) + tuple(drafts[i]), logits[i].float().cpu())
            )

    def on_verified(self, request_ids: tuple[str, ...], num_accepted: tuple[int, ...]) -> None:
        for request_id, accepted in zip(request_ids, num_accepted):
            state = self._state.get(request_id)
            if state is None or state.num_written <= state.newest:
                continue
            self.hooks.draft_kv_written(request_id, state.num_written)
            # Positions newest+1 .. newest+accepted hold accepted drafts: still valid.
            state.num_cached = min(state.num_written, state.newest + 1 + accepted)
            state.num_written = state.num_cached

    def num_final_draft_kv(self, request_id: str) -> int:
        state = self._state.get(request_id)
        return 0 if state is None else state.num_cached  # accepted positions; the catch-up writes from there on

    def resume_at(self, request_id: str, num_cached_tokens: int) -> None:
        self._state[request_id] = _DraftState(num_cached=num_cached_tokens, num_written=num_cached_tokens)

    def free(self, request_id: str) -> None:
        if not self.hooks.keeps_draft_state(request_id):
            self._state.pop(request_id, None)

    def describe(self) -> dict[str, object]:
        cfg = self.model.config
        return {"method": "draft", "draft_layers": cfg.num_hidden_layers, "draft_hidden_size": cfg.hidden_size}


def load_draft_proposer(ctx) -> DraftModelProposer:
    from specbench.models.loader import load_model

    cfg = ctx.config
    if not cfg.draft:
        raise SpecbenchError("method 'draft' needs --draft (a draft model path or hub id)")
    draft = load_model(
        cfg.draft,
        dtype=ctx.dtype,
        device=ctx.device,
        attn_backend=ctx.attn_backend,
        load_format=cfg.load_format,
        allow_pickle=cfg.allow_pickle,
        seed=cfg.seed + 1,
        fused_kernels=cfg.fused_kernels,
        moe_kernels=cfg.moe_kernels,
    )
    if draft.config.is_hybrid:
        # Its catch-up and draft steps would need per-request state slots with their own rollback; only targets
        # have them (engine/state_attach.py).
        raise SpecbenchError(f"a hybrid model ({draft.config.architecture}: recurrent-state layers) cannot be a "
                             "draft LM; use a full-attention draft or n-gram")
    check_vocab_fits(draft, ctx.target)
    return DraftModelProposer(draft.model, ctx.target.config.vocab_size, cfg.block_size, ctx.device, ctx.hooks,
                              debug_invariants=cfg.debug_invariants)


def check_vocab_fits(draft, target) -> None:
    """A draft may only propose ids the target has, with the same meaning, and must embed every id it commits."""
    check_draft_vocab(draft.config.vocab_size, target.config.vocab_size)
    check_tokenizer_fits(draft.tokenizer, draft.config.vocab_size, "draft")
    if draft.tokenizer is not None and target.tokenizer is not None:
        if draft.tokenizer.get_vocab() != target.tokenizer.get_vocab():
            raise SpecbenchError("draft and target tokenizers differ: a draft LM must share the target's tokenizer")
