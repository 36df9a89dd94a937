"""Runs the target model's phases (prefill, verify) over the paged KV cache; verify replays CUDA graphs when on."""

from __future__ import annotations

import torch

from specbench.runtime.cuda_graph import CudaGraphRunner, GraphPlan
from specbench.runtime.phases import PrefillInput, TargetOutput, VerifyInput
from specbench.kv.kv_cache import KVCache


class TargetRunner:
    def __init__(self, model, kv_cache: KVCache, feature_layers: tuple[int, ...]) -> None:
        self.model = model
        self.kv_cache = kv_cache
        # () = no features, (-1,) = final normed hidden state, else HF hidden_states indices.
        self.feature_layers = feature_layers
        self._aux_ids = tuple(i for i in feature_layers if i >= 0)
        self.graphs: CudaGraphRunner | None = None

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
    def verify(self, inp: VerifyInput) -> TargetOutput:
        # A tree verify (md.tree) runs eagerly: the captured graphs are causal, their metadata buffers hold no mask.
        shape = None if self.graphs is None or inp.md.tree is not None else self.graphs.shape_for(inp.md)
        paths = self.model.attn_backend.paths
        if shape is None:
            paths.record("target.eager")
            return self._verify_eager(inp.input_ids, inp.md)
        paths.record("graph.decode" if shape.query_len == 1 else "graph.verify")
        outputs = self.graphs.replay(shape, inp.input_ids, inp.md)
        # Features outlive the step (the proposer reads them next round): copy them out of the graph's pool.
        return TargetOutput(outputs[0], outputs[1].clone() if len(outputs) > 1 else None)

    def _verify_eager(self, input_ids, md, check_metadata: bool = True) -> TargetOutput:
        out = self.model(input_ids, md, self.kv_cache, aux_layer_ids=self._aux_ids, phase="verify",
                         check_metadata=check_metadata)
        return TargetOutput(self.model.compute_logits(out.hidden_states), self._features(out))

    def enable_cuda_graphs(self, plan: GraphPlan, max_query_len: int) -> None:
        self.model.reserve_rope(plan.max_positions, plan.device)

        def forward(input_ids, md, hidden):
            out = self._verify_eager(input_ids, md, check_metadata=False)
            return (out.logits,) if out.features is None else (out.logits, out.features)

        self.graphs = CudaGraphRunner(forward, plan, name="verify", max_query_len=max_query_len,
                                      check_metadata=self.model.attn_backend.begin_forward,
                                      paths=self.model.attn_backend.paths)
