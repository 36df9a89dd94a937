"""How many distinct experts each MoE layer wakes per decode or verify step, counted from the router's choices.

The timed runs replay CUDA graphs, inside which nothing can be counted without changing the model's code. So the
count comes from a separate, cheap instrumented pass: the same engine, run eagerly (graphs off, one step at a time)
on the same prompts as the first timed batch, for a few dozen output tokens. A forward pre-hook on every MoE layer
re-runs that layer's router on the layer's input (the routing is a pure function of it: the same ids the forward
uses) and counts the distinct experts of the real rows. Steps are told apart by their number of real tokens: a
decode step of c requests has c, a verify of k drafted tokens has c * (k + 1); prefill chunks are far longer.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

import torch

from specbench.perf.gpu_perf import GraphsOff, random_prompts
from specbench.sampling_params import SamplingParams


@dataclass(frozen=True)
class ExpertCounts:
    num_tokens: int  # real tokens of the steps counted (c, or c * (k + 1))
    num_steps: int  # steps counted
    num_experts: int  # routed experts per MoE layer
    active_per_layer: tuple[float, ...]  # [num_moe_layers] distinct experts woken, mean over the steps

    @property
    def mean_active(self) -> float:
        """Distinct experts per layer, mean over layers and steps."""
        return statistics.mean(self.active_per_layer)

    def to_dict(self) -> dict:
        return {"num_tokens": self.num_tokens, "num_steps": self.num_steps, "num_experts": self.num_experts,
                "mean_active": self.mean_active, "active_per_layer": list(self.active_per_layer)}


class RoutingRecorder:
    """Forward pre-hooks on a model's MoE layers; `counts[num_real_tokens][layer]` lists distinct experts per call."""

    def __init__(self, model) -> None:
        from specbench.models.moe import MoeMLP

        self.layers = [m for m in model.modules() if isinstance(m, MoeMLP)]
        self.counts: dict[int, list[list[int]]] = defaultdict(lambda: [[] for _ in self.layers])
        self._handles = []

    def __enter__(self):  # -> self
        self._handles = [layer.register_forward_pre_hook(self._hook(i)) for i, layer in enumerate(self.layers)]
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _hook(self, index: int):
        def hook(module, args) -> None:
            x = args[0]  # [num_tokens, hidden]
            is_real = args[1] if len(args) > 1 else None  # [num_tokens] bool or None
            with torch.no_grad():
                ids = module.route(x, is_real).topk_ids
            real_ids = ids[ids < module.config.num_experts]
            num_real = x.shape[0] if is_real is None else int(is_real.sum())
            self.counts[num_real][index].append(int(torch.unique(real_ids).numel()))

        return hook

    def expert_counts(self, num_tokens: int) -> ExpertCounts | None:
        """Counts of the calls with exactly num_tokens real tokens; None if there were none."""
        per_layer = self.counts.get(num_tokens)
        if not per_layer or not per_layer[0]:
            return None
        return ExpertCounts(num_tokens=num_tokens, num_steps=len(per_layer[0]),
                            num_experts=self.layers[0].config.num_experts,
                            active_per_layer=tuple(statistics.mean(c) for c in per_layer))


def probe_active_experts(llm, *, concurrency: int, num_steps: int, prompt_len: int,
                         num_output_tokens: int = 32) -> ExpertCounts | None:
    """Distinct experts per layer of the decode (num_steps 0) or verify (k = num_steps) steps of `concurrency`
    requests, on the prompts measure_decode times first (same seed)."""
    engine = llm.engine
    engine.set_num_steps(num_steps)
    engine.set_async_scheduling(False)
    model = engine.runner.model
    prompts = random_prompts(model.config.vocab_size, concurrency, prompt_len, seed=concurrency)
    with GraphsOff(engine), RoutingRecorder(model) as recorder:
        llm.generate(prompts, SamplingParams(max_tokens=num_output_tokens, ignore_eos=True))
    return recorder.expert_counts(concurrency * (num_steps + 1))
