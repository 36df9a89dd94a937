"""Granite-4's decoder blocks (GraniteMoeHybridForCausalLM, a hybrid target): Bamba's layout (a Mamba-2 mixer or
full attention per layer, `attn`/`mamba` by `layer_types`) with muP multipliers and Granite's MLP: routed experts
(top-k of the router logits, softmax over those k) plus an always-on shared SiLU MLP, or the shared MLP alone
(`num_local_experts` 0).

Multipliers (ModelConfig): embeddings times embedding_multiplier (DecoderLM.embed), each mixer's and MLP's output
times residual_multiplier before its residual add (here), q.k times attention_multiplier instead of head_dim ** -0.5
(SelfAttention's scale), logits divided by logits_scaling (DecoderLM.compute_logits). RoPE only where
position_embedding_type is "rope" (the released checkpoints say "nope").

Checkpoint names (`granite_names`): the stacked experts `block_sparse_moe.input_linear` [E, 2 * inter, hidden]
(gate rows, then up) and `output_linear` [E, hidden, inter] split into per-expert views for moe_weights' targets,
the router `block_sparse_moe.router.layer`, the shared MLP `shared_mlp.input_linear` ([gate; up] rows, as
GatedMLP's gate_up_proj) / `output_linear`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import torch
from torch import nn

from specbench.attention.backend import AttentionBackend
from specbench.attention.metadata import AttentionMetadata
from specbench.errors import SpecbenchError
from specbench.kv.kv_cache import KVCache
from specbench.models.config import ModelConfig
from specbench.models.layer_output import LayerOutput
from specbench.models.bamba import mamba_or_attention
from specbench.models.layers import GatedMLP, RMSNorm
from specbench.models.moe import MoeMLP
from specbench.models.moe_forward import moe_forward
from specbench.recurrent.mamba2_mixer import Mamba2Mixer

_EXPERTS = re.compile(r"(.*\.layers\.\d+)\.block_sparse_moe\.(input_linear\.weight|output_linear\.weight|"
                      r"experts\.gate_up_proj|experts\.down_proj)$")
_ROUTER = re.compile(r"(.*\.layers\.\d+)\.block_sparse_moe\.router\.(?:layer\.)?weight$")
_SHARED = re.compile(r"(.*\.layers\.\d+)\.shared_mlp\.(input|output)_linear\.weight$")


class GraniteHybridDecoderLayer(nn.Module):
    """h += m * mixer(norm(h)); h += m * (experts(norm(h)) + shared(norm(h))), m the residual multiplier."""

    def __init__(self, config: ModelConfig, layer_idx: int, attention: nn.Module | None,
                 state_layer: int | None) -> None:
        super().__init__()
        eps = config.rms_norm_eps
        self.residual_multiplier = config.residual_multiplier
        self.input_layernorm = RMSNorm(config.hidden_size, eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, eps)
        # state_layer None: an attention layer (`attention`, llama.SelfAttention); else its state's StateCache index
        self.mamba = None if state_layer is None else Mamba2Mixer(config.mamba2, config.hidden_size, eps, state_layer)
        self.self_attn = attention if state_layer is None else None
        # routed experts with the shared MLP inside (MoeMLP's shared expert), or the shared MLP alone
        self.mlp = MoeMLP(config.moe) if config.is_moe_layer(layer_idx) else None
        self.shared_mlp = None if self.mlp is not None else GatedMLP(config.hidden_size, config.intermediate_size)

    def forward(self, hidden: torch.Tensor, residual: torch.Tensor | None, cos_sin: torch.Tensor,
                kv_cache: KVCache, md: AttentionMetadata, backend: AttentionBackend) -> LayerOutput:
        if residual is None:
            normed, residual = self.input_layernorm(hidden), hidden
        else:
            normed, residual = self.input_layernorm.add_and_norm(hidden, residual)
        layer_input = residual
        mixed = mamba_or_attention(self.mamba, self.self_attn, normed, cos_sin, kv_cache, md, backend)
        m = self.residual_multiplier
        normed, residual = self.post_attention_layernorm.add_and_norm(mixed * m, residual)
        out = moe_forward(self.mlp, normed, md, backend.paths) if self.mlp is not None else self.shared_mlp(normed)
        return LayerOutput(hidden=out * m, residual=residual, layer_input=layer_input)


def granite_names(weights: Iterable[tuple[str, torch.Tensor]], has_experts: bool
                  ) -> Iterator[tuple[str, torch.Tensor]]:
    """The checkpoint's tensors under the names moe_weights' targets use (per-expert views, no copies): experts
    `{layer}.block_sparse_moe.experts.{e}.{gate,up,down}_proj.weight`, router `{layer}.block_sparse_moe.gate.weight`,
    the shared MLP's gate/up/down `{layer}.block_sparse_moe.shared_mlp.*` in a MoE layer (moe_weights' shared
    expert), `{layer}.shared_mlp.*` in a dense one (llama.fused_checkpoint_targets' gate_up_proj). Also reads
    transformers' in-memory names (experts.gate_up_proj, router.weight)."""
    for name, tensor in weights:
        experts, router, shared = _EXPERTS.match(name), _ROUTER.match(name), _SHARED.match(name)
        if experts is not None:
            layer, part = experts.groups()
            if tensor.dim() != 3:
                raise SpecbenchError(f"weight {name!r} has shape {tuple(tensor.shape)}; stacked experts are "
                                     "[experts, out, in]")
            if part.startswith(("input", "experts.gate_up")):
                inter = tensor.shape[1] // 2
                for e in range(tensor.shape[0]):
                    yield f"{layer}.block_sparse_moe.experts.{e}.gate_proj.weight", tensor[e, :inter]
                    yield f"{layer}.block_sparse_moe.experts.{e}.up_proj.weight", tensor[e, inter:]
            else:
                for e in range(tensor.shape[0]):
                    yield f"{layer}.block_sparse_moe.experts.{e}.down_proj.weight", tensor[e]
        elif router is not None:
            yield f"{router.group(1)}.block_sparse_moe.gate.weight", tensor
        elif shared is not None:
            layer, side = shared.groups()
            prefix = f"{layer}.block_sparse_moe.shared_mlp" if has_experts else f"{layer}.shared_mlp"
            if side == "input":
                width = tensor.shape[0] // 2
                yield f"{prefix}.gate_proj.weight", tensor[:width]
                yield f"{prefix}.up_proj.weight", tensor[width:]
            else:
                yield f"{prefix}.down_proj.weight", tensor
        else:
            yield name, tensor
