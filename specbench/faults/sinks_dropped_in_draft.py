"""The draft LM attends without its attention sinks: every draft-side forward (catch-up and each draft step) hands
the backend its layers' scale and cap but not their sinks.

What is real here: a gpt-oss target drafted by a smaller gpt-oss (the draft method), where the draft model runs on
a draft-side attention path (its own backend and metadata builders, as serving engines give the draft runner) that
does not implement sinks and silently drops them. EAGLE heads are Llama layers without sinks, so for them there is
nothing to drop; the target's verify is the target's path and keeps its sinks.

Outputs stay lossless (the draft only proposes) and acceptance barely moves on a tiny pair, so greedy-vs-HF and
plain-vs-speculative comparisons pass; INV-SCORE (debug invariants: each sink layer's attention recomputed with the
layer's own sinks) and the draft oracle (a clean engine's cache-free recompute of every draft logit) catch it.
"""

from __future__ import annotations

import dataclasses

import torch

from specbench.attention.backend import AttentionBackend
from specbench.attention.metadata import AttentionMetadata
from specbench.attention.score_params import PLAIN, ScoreParams
from specbench.faults.fault import Fault, Mutant
from specbench.kv.kv_cache import KVCache
from specbench.speculation.drafters.draft_model import DraftModelProposer


class SinksDroppedInDraft(Mutant):
    fault = Fault("sinks-dropped-in-draft", "the draft LM's attention runs without its learned sinks (gpt-oss)",
                  "issue 27 (sinks in the draft path)", "draft", DraftModelProposer)

    def install(self, engine) -> None:
        engine.proposer.pause_step_graphs(True)  # every draft forward eager, through the wrapped backend
        model = engine.proposer.model
        model.attn_backend = _SinklessBackend(model.attn_backend)


class _SinklessBackend:
    """The draft model's backend, forgetting `score.sinks` on every call; everything else passes through."""

    def __init__(self, inner: AttentionBackend) -> None:
        self._inner = inner
        self.name = inner.name
        self.supports_cuda_graphs = inner.supports_cuda_graphs
        self.attends_key_windows = inner.attends_key_windows
        self.supported_kinds = inner.supported_kinds
        self.paths = inner.paths
        self.check_invariants = inner.check_invariants

    def begin_forward(self, md: AttentionMetadata, where: str) -> None:
        self._inner.begin_forward(md, where)

    def forward(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv_cache: KVCache,
                md: AttentionMetadata, score: ScoreParams = PLAIN) -> torch.Tensor:
        return self._inner.forward(layer, q, k, v, kv_cache, md, dataclasses.replace(score, sinks=None))

    def attend_stored(self, layer: int, q: torch.Tensor, kv_cache: KVCache, md: AttentionMetadata,
                      score: ScoreParams = PLAIN) -> torch.Tensor:
        return self._inner.attend_stored(layer, q, kv_cache, md, dataclasses.replace(score, sinks=None))
