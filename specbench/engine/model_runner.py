"""Runs the target model's phases (prefill, verify) over the paged KV cache."""

from __future__ import annotations

import torch

from specbench.engine.phases import PrefillInput, TargetOutput, VerifyInput
from specbench.kv.kv_cache import KVCache


class TargetRunner:
    def __init__(self, model, kv_cache: KVCache, feature_layers: tuple[int, ...]) -> None:
        self.model = model
        self.kv_cache = kv_cache
        # () = no features, (-1,) = final normed hidden state, else HF hidden_states indices.
        self.feature_layers = feature_layers
        self._aux_ids = tuple(i for i in feature_layers if i >= 0)

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
        return TargetOutput(logits, self._features(out))

    @torch.inference_mode()
    def verify(self, inp: VerifyInput) -> TargetOutput:
        out = self.model(inp.input_ids, inp.md, self.kv_cache, aux_layer_ids=self._aux_ids, phase="verify")
        return TargetOutput(self.model.compute_logits(out.hidden_states), self._features(out))
