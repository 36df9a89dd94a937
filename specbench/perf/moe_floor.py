"""The memory-bandwidth floor of one step of a mixture-of-experts target: the bytes that step must read, over the
measured copy bandwidth (the figure the dense rows of scripts/bench_gpu.py use).

A step reads
- every dense weight once: attention, norms, routers, dense MLPs, shared experts, the LM head;
- of an untied embedding table only the rows of the step's tokens (a tied table is the LM head: read whole);
- of each MoE layer only the experts the step's tokens were routed to, counted from the router's own choices
  (specbench/perf/moe_routing_probe.py): the distinct experts of that layer in that step;
- the K/V of every request, within each layer's window.
Writes (the step's own K/V rows, activations) are left out: kilobytes against gigabytes.

The dense rows' floor (specbench/perf/gpu_perf.py) counts every weight, the embedding table included; on a MoE
target that would count experts nobody reads, so these rows use this one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelBytes:
    """A model's weights and K/V, split the way one step reads them."""

    dense_bytes: int  # read whole by every step
    embedding_row_bytes: int  # one row of the untied embedding table; 0 when tied (then in dense_bytes)
    expert_bytes: tuple[int, ...]  # [num_moe_layers] one routed expert's weights and biases, per MoE layer
    kv_bytes_per_token: int  # K and V of one token in one layer
    windows: tuple[int | None, ...]  # [num_kv_layers] keys a query sees (its window); None: full attention


@dataclass(frozen=True)
class StepBytes:
    dense: int
    embedding: int
    experts: int
    kv: int

    @property
    def total(self) -> int:
        return self.dense + self.embedding + self.experts + self.kv

    def floor_ms(self, bandwidth_gbps: float) -> float:
        return self.total / (bandwidth_gbps * 1e9) * 1e3

    def to_dict(self) -> dict:
        return {"dense_gb": self.dense / 1e9, "embedding_gb": self.embedding / 1e9, "experts_gb": self.experts / 1e9,
                "kv_gb": self.kv / 1e9, "total_gb": self.total / 1e9}


def mean_decode_context(prompt_len: int, output_len: int, window: int | None) -> float:
    """Keys one decode query attends to, averaged over the decode steps of a prompt_len -> output_len request (the
    step emitting output token i + 1 attends to prompt_len + i keys)."""
    lens = [prompt_len + i for i in range(1, output_len)] or [prompt_len]
    return sum(min(n, window) if window is not None else n for n in lens) / len(lens)


def mean_step_bytes(
    model: ModelBytes,
    *,
    num_reqs: int,
    tokens_per_req: int,  # 1 (decode) or k + 1 (verify)
    num_active_experts: list[float],  # [num_moe_layers]
    prompt_len: int,
    output_len: int,
) -> StepBytes:
    """The bytes of one step, averaged over the decode phase of num_reqs requests of prompt_len -> output_len tokens: K/V by each
    layer's mean window-clipped context (a verify's last query sees k more keys than a decode's)."""
    if len(num_active_experts) != len(model.expert_bytes):
        raise ValueError(f"{len(num_active_experts)} expert counts for {len(model.expert_bytes)} MoE layers")
    extra = tokens_per_req - 1
    kv = model.kv_bytes_per_token * num_reqs * sum(
        mean_decode_context(prompt_len + extra, output_len, w) for w in model.windows)
    experts = sum(n * b for n, b in zip(num_active_experts, model.expert_bytes, strict=True))
    return StepBytes(dense=model.dense_bytes, embedding=num_reqs * tokens_per_req * model.embedding_row_bytes,
                     experts=round(experts), kv=round(kv))


def model_bytes(model) -> ModelBytes:
    """ModelBytes of a specbench DecoderLM (its parameters as allocated, so the dtype is the run's)."""
    from specbench.models.moe import MoeMLP

    config = model.config
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    expert_bytes = []
    for module in model.modules():
        if isinstance(module, MoeMLP):
            routed = [module.gate_up_weight, module.down_weight, module.gate_up_bias, module.down_bias]
            layer = sum(t.numel() * t.element_size() for t in routed if t is not None)
            expert_bytes.append(layer // module.config.num_experts)
            total -= layer
    embedding_row_bytes = 0
    if not config.tie_word_embeddings:
        table = model.embed_weight
        embedding_row_bytes = table.shape[1] * table.element_size()
        total -= table.numel() * table.element_size()
    spec = model.kv_cache_spec()
    kinds = config.attention_kinds or (None,) * config.num_hidden_layers
    # A hybrid's Gated DeltaNet layers read no K/V (their state: specbench/perf/hybrid_floor.py)
    windows = tuple(None if k is None else k.kv_window for k in kinds if k is None or not k.is_recurrent_state)
    return ModelBytes(dense_bytes=total, embedding_row_bytes=embedding_row_bytes, expert_bytes=tuple(expert_bytes),
                      kv_bytes_per_token=spec.bytes_per_block(1) // spec.num_layers, windows=windows)
