"""Runs the target model's phases (prefill, verify) over the paged KV cache; verify replays CUDA graphs when on.

A hybrid target (recurrent-state layers) replays graphs for its plain decode and uniform chain verifies only
(recurrent/graph_rows.py): the graph's rows read the slots from a static buffer loaded before each replay, and its
kept per-position states come back as graph outputs for the commit. Its other verifies run eagerly."""

from __future__ import annotations

import dataclasses

import torch

from specbench.recurrent.graph_rows import GraphStateRows, replays_graph
from specbench.runtime.cuda_graph import CudaGraphRunner, GraphPlan, GraphShape
from specbench.runtime.phases import MixedInput, PrefillInput, TargetOutput, VerifyInput
from specbench.kv.kv_cache import KVCache


class TargetRunner:
    def __init__(self, model, kv_cache: KVCache, feature_layers: tuple[int, ...]) -> None:
        self.model = model
        self.kv_cache = kv_cache
        # () = no features, (-1,) = final normed hidden state, else HF hidden_states indices.
        self.feature_layers = feature_layers
        self._aux_ids = tuple(i for i in feature_layers if i >= 0)
        self.graphs: CudaGraphRunner | None = None
        self._plan: GraphPlan | None = None  # what the graphs were sized for (tree graphs are sized from it)
        # Tree verify graphs per query length (root + num_draft_tokens nodes), captured when a tree DraftShape is set
        # (prepare_tree_graphs); replayed only while `graphs` is on (GraphsOff turns both off).
        self.tree_graphs: dict[int, CudaGraphRunner] = {}
        # A hybrid target's graph inputs (the static slot buffer); None: no recurrent state, or graphs off
        self.graph_states: GraphStateRows | None = None

    def _features(self, out) -> torch.Tensor | None:
        if not self.feature_layers:
            return None
        if self.feature_layers == (-1,):
            return out.hidden_states
        return out.aux_hidden_states

    @torch.inference_mode()
    def prefill(self, inp: PrefillInput) -> TargetOutput:
        out = self.model(inp.input_ids, inp.md, self.kv_cache, aux_layer_ids=self._aux_ids, phase="prefill")
        logits = self.model.compute_logits(out.hidden_states[inp.logits_indices])
        prompt_logits = None
        if inp.prompt_logits_indices is not None:
            prompt_logits = self.model.compute_logits(out.hidden_states[inp.prompt_logits_indices])
        return TargetOutput(logits, self._features(out), prompt_logits)

    @torch.inference_mode()
    def mixed(self, inp: MixedInput) -> TargetOutput:
        """A mixed step's forward (verify rows and prompt chunks, engine/chunk_inputs.py), always eager: its ragged
        chunk segments fit no captured graph shape. Logits at inp.logits_indices only (every verify row, each final
        chunk's last row); features of every row."""
        out = self.model(inp.input_ids, inp.md, self.kv_cache, aux_layer_ids=self._aux_ids, phase="mixed")
        logits = self.model.compute_logits(out.hidden_states[inp.logits_indices])
        prompt_logits = None
        if inp.prompt_logits_indices is not None:
            prompt_logits = self.model.compute_logits(out.hidden_states[inp.prompt_logits_indices])
        return TargetOutput(logits, self._features(out), prompt_logits)

    def graph_for(self, md) -> tuple[CudaGraphRunner, GraphShape] | None:
        """The runner and graph a verify replays on, or None to run it eagerly: causal verifies on `graphs`, tree
        verifies on the tree graphs of their query length (captured for the run's DraftShape)."""
        if self.graphs is None:
            return None
        if self.graph_states is not None and not replays_graph(md.state_rows, md.query_start_loc_cpu):
            return None  # a hybrid target's prefill-like, ragged or tree verify: eager
        runner = self.graphs if md.tree is None else self.tree_graphs.get(md.max_query_len)
        shape = None if runner is None else runner.shape_for(md)
        return None if shape is None else (runner, shape)

    @torch.inference_mode()
    def verify(self, inp: VerifyInput) -> TargetOutput:
        graph = self.graph_for(inp.md)
        paths = self.model.attn_backend.paths
        if graph is None:
            paths.record("target.eager")
            return self._verify_eager(inp.input_ids, inp.md)
        runner, shape = graph
        if runner.is_tree:
            paths.record("graph.verify_tree")
        else:
            paths.record("graph.decode" if shape.query_len == 1 else "graph.verify")
        if self.graph_states is not None:
            paths.record("graph.hybrid_decode" if shape.query_len == 1 else "graph.hybrid_verify")
            self.graph_states.load(inp.md.state_rows, shape.num_reqs)
        outputs = runner.replay(shape, inp.input_ids, inp.md)
        if self.graph_states is not None:  # the kept states' rows (the real requests': the replay's first rows)
            num_kept = self.graph_states.num_kept_outputs
            self.graph_states.restore_kept(outputs[-num_kept:])
            outputs = outputs[:-num_kept]
        # Features outlive the step (the proposer reads them next round): copy them out of the graph's pool.
        return TargetOutput(outputs[0], outputs[1].clone() if len(outputs) > 1 else None)

    def _verify_eager(self, input_ids, md, check_metadata: bool = True) -> TargetOutput:
        out = self.model(input_ids, md, self.kv_cache, aux_layer_ids=self._aux_ids, phase="verify",
                         check_metadata=check_metadata)
        return TargetOutput(self.model.compute_logits(out.hidden_states), self._features(out))

    def _graph_forward(self, input_ids, md, hidden):
        """What a graph captures (off CUDA: what a "replay" reruns) on the static buffers' metadata; a hybrid
        target's forward also reads its rows from the static slot buffer and returns its kept states."""
        if self.graph_states is None:
            out = self._verify_eager(input_ids, md, check_metadata=False)
            return (out.logits,) if out.features is None else (out.logits, out.features)
        md = dataclasses.replace(md, state_rows=self.graph_states.rows(md.seq_lens.shape[0], md.max_query_len))
        self.kv_cache.states.begin_forward()
        with self.graph_states.forward_on_static_kept():
            out = self._verify_eager(input_ids, md, check_metadata=False)
        kept = self.graph_states.kept_outputs()
        return ((out.logits,) if out.features is None else (out.logits, out.features)) + kept

    def enable_cuda_graphs(self, plan: GraphPlan, max_query_len: int) -> None:
        self.model.reserve_rope(plan.max_positions, plan.device)
        self._plan = plan
        states = self.kv_cache.states
        self.graph_states = None if states is None else GraphStateRows(states, plan.max_num_reqs, max_query_len)
        self.graphs = CudaGraphRunner(self._graph_forward, plan, name="verify", max_query_len=max_query_len,
                                      check_metadata=self.model.attn_backend.begin_forward,
                                      paths=self.model.attn_backend.paths)

    def prepare_tree_graphs(self, query_len: int) -> None:
        """Capture tree verify graphs for `query_len` rows per request (root + nodes) at every batch bucket, once
        per query length, outside any timed region. No-op while CUDA graphs are off (eager engines, GraphsOff)."""
        if self.graphs is None or self._plan is None or query_len in self.tree_graphs:
            return
        if self.graph_states is not None:  # a hybrid target's tree verifies run eagerly (graph_rows.replays_graph)
            return
        plan = tree_graph_plan(self._plan, query_len)
        runner = CudaGraphRunner(self._graph_forward, plan, name="verify_tree", max_query_len=query_len,
                                 check_metadata=self.model.attn_backend.begin_forward,
                                 paths=self.model.attn_backend.paths, is_tree=True)
        runner.capture(query_len)
        self.tree_graphs[query_len] = runner


def tree_graph_plan(plan: GraphPlan, query_len: int) -> GraphPlan:
    """The chain graphs' plan with block tables wide enough for a tree verify, whose storage rows reach
    query_len - 1 positions past the newest token (more than the chain's k_max + 1 the plan was sized for). RoPE
    positions stay within the plan's (a tree's deepest path fits the context: engine/tree_round.py round_plan), so
    the RoPE tables the captured graphs read are never grown (growing them would free what those graphs read)."""
    return dataclasses.replace(plan, max_blocks_per_req=-(-(plan.max_positions + query_len) // plan.block_size))
