"""Llama-family decoder (Llama 2/3, Mistral, SmolLM2, Qwen2/2.5, Qwen3, the MoE ones, gpt-oss; Gemma-3's blocks in
gemma.py) over a paged KV cache.

Attention goes through an `AttentionBackend`, which also writes K/V. Projections are fused
(q/k/v into `qkv_proj`, gate/up into `gate_up_proj`); `load_weights` maps HF names onto them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from specbench.attention.backend import AttentionBackend, UncheckedBackend
from specbench.attention.kind_invariants import check_layer_kinds
from specbench.attention.layer_kinds import LayerKinds
from specbench.attention.metadata import AttentionMetadata
from specbench.attention.score_invariants import check_score_params
from specbench.attention.score_params import ScoreParams
from specbench.errors import SpecbenchError
from specbench.kv.kv_cache import KVCache, KVCacheSpec
from specbench.models import decode_gemv, fused_kernels
from specbench.models.config import ModelConfig
from specbench.models.config_multimodal import language_model_names
from specbench.models.config_arch import GPT_OSS
from specbench.models.dummy_weights import fill_dummy_weights
from specbench.models.gemma import GemmaDecoderLayer
from specbench.models.gpt_oss_weights import gpt_oss_checkpoint_targets, gpt_oss_layout
from specbench.models.layer_output import LayerOutput
from specbench.models.layers import GatedMLP, OffsetRMSNorm, RMSNorm, RotaryEmbedding, uninitialized_embedding
from specbench.models.moe import MoeMLP
from specbench.models.moe_forward import normed_moe_forward
from specbench.models.moe_weights import (
    EXPERT_NAMES,
    moe_checkpoint_targets,
    per_expert_names,
)
from specbench.models.partial_rotary import permuted_for_rope
from specbench.models.bamba import BambaDecoderLayer
from specbench.models.config_hybrid import BAMBA, GRANITE_HYBRID
from specbench.models.granite_hybrid import GraniteHybridDecoderLayer, granite_names
from specbench.models.config_nemotron_h import NEMOTRON_H
from specbench.models.nemotron_h import Fp32WeightRMSNorm, NemotronHLayer, backbone_names, nemotron_checkpoint_name
from specbench.models.qwen3_next import HybridDecoderLayer, ensure_state_rows, kv_layer_ids, state_layer_ids
from specbench.models.materialize import materialize_


@dataclass(frozen=True)
class ModelOutput:
    hidden_states: torch.Tensor  # [num_tokens, hidden] after the final norm
    # [num_tokens, len(aux_layer_ids) * hidden], pre-norm residual stream, in aux_layer_ids order; None if none asked
    aux_hidden_states: torch.Tensor | None


class SelfAttention(fused_kernels.UsesFusedKernels, nn.Module):
    """q/k/v projection (+ Qwen3 q/k norm), RoPE, backend attention, output projection.

    `input_size` defaults to hidden_size; EAGLE-3 heads use 2 * hidden_size.
    """

    def __init__(self, config: ModelConfig, layer_idx: int, input_size: int | None = None) -> None:
        super().__init__()
        self.layer_idx = layer_idx  # index of this layer's K/V in the KVCache it is given
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.q_size, self.kv_size = config.q_size, config.kv_size
        in_size = input_size or config.hidden_size
        # rows: [q; k; v]
        self.qkv_proj = nn.Linear(in_size, self.q_size + 2 * self.kv_size, bias=config.attention_bias)
        self.o_proj = nn.Linear(self.q_size, config.hidden_size, bias=config.has_o_proj_bias)
        norm = OffsetRMSNorm if config.is_gemma else RMSNorm
        self.q_norm = norm(self.head_dim, config.rms_norm_eps) if config.use_qk_norm else None
        self.k_norm = norm(self.head_dim, config.rms_norm_eps) if config.use_qk_norm else None
        # [num_heads] gpt-oss's learned sink logits (HF `self_attn.sinks`); None: no sinks.
        self.sinks = nn.Parameter(torch.empty(self.num_heads)) if config.has_attention_sinks else None
        self.scale = config.attention_scale
        self.softcap = config.attn_logit_softcapping
        self.has_rope = config.has_rope  # False: q and k attend unrotated (Nemotron-H)

    def score_params(self) -> ScoreParams:
        """This layer's scale, soft-cap and sinks, as every attention call hands them to the backend."""
        sinks = None if self.sinks is None else self.sinks.float()  # the kernels read fp32 logits
        return ScoreParams(scale=self.scale, softcap=self.softcap, sinks=sinks)

    def forward(
        self,
        x: torch.Tensor,  # [num_tokens, input_size]
        cos_sin: torch.Tensor,  # [num_tokens, 2, head_dim] fp32
        kv_cache: KVCache,
        md: AttentionMetadata,
        backend: AttentionBackend,
    ) -> torch.Tensor:  # [num_tokens, hidden]
        return self.o_proj(self.attend(self.qkv_proj(x), cos_sin, kv_cache, md, backend))

    def attend(
        self,
        qkv: torch.Tensor,  # [num_tokens, q_size + 2 * kv_size], qkv_proj's output
        cos_sin: torch.Tensor,  # [num_tokens, 2, head_dim] fp32
        kv_cache: KVCache,
        md: AttentionMetadata,
        backend: AttentionBackend,
    ) -> torch.Tensor:  # [num_tokens, q_size], o_proj's input
        """Everything between the two projections: split, q/k norm, RoPE, K/V store and attention."""
        n = qkv.shape[0]
        # split_with_sizes: Tensor.split's Python wrapper costs twice the C call it ends in
        q, k, v = qkv.split_with_sizes([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = q.view(n, self.num_heads, self.head_dim)
        k = k.view(n, self.num_kv_heads, self.head_dim)
        v = v.view(n, self.num_kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.has_rope:
            q, k = RotaryEmbedding.rotate_qk(q, k, cos_sin, self.fused_policy)
        score = self.score_params()
        out = backend.forward(self.layer_idx, q, k, v, kv_cache, md, score)  # [num_tokens, num_heads, head_dim]
        if backend.check_invariants and not score.is_plain:
            check_score_params(self.layer_idx, q, out, kv_cache, md, score)
        return out.reshape(n, self.q_size)


class DecoderLayer(nn.Module):
    """Pre-norm residual block: h += attn(norm(h)); h += mlp(norm(h)).

    The previous block's MLP add happens in this block's input norm (one add+norm kernel on the fused path).
    """

    def __init__(self, config: ModelConfig, layer_idx: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = SelfAttention(config, layer_idx)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        # A MoE layer (config.moe_layer_ids) routes over experts; the others are dense.
        self.mlp = MoeMLP(config.moe) if config.is_moe_layer(layer_idx) else GatedMLP(
            config.hidden_size, config.intermediate_size
        )

    def forward(
        self,
        hidden: torch.Tensor,  # [num_tokens, hidden] previous block's MLP output, or the stream itself (first block)
        residual: torch.Tensor | None,  # [num_tokens, hidden] stream before that MLP output; None: first block
        cos_sin: torch.Tensor,  # [num_tokens, 2, head_dim]
        kv_cache: KVCache,
        md: AttentionMetadata,
        backend: AttentionBackend,
    ) -> LayerOutput:
        # Every sum is a new tensor, never an input updated in place: callers keep layer inputs as aux states.
        if decode_gemv.applies(self, hidden):
            backend.paths.record(decode_gemv.fused_path(self, hidden.shape[0]))
            return decode_gemv.block(self, hidden, residual, cos_sin, kv_cache, md, backend)
        backend.paths.record(decode_gemv.eager_path(self, hidden))
        if residual is None:
            normed, residual = self.input_layernorm(hidden), hidden
        else:
            normed, residual = self.input_layernorm.add_and_norm(hidden, residual)
        layer_input = residual
        attn_out = self.self_attn(normed, cos_sin, kv_cache, md, backend)
        if isinstance(self.mlp, MoeMLP):
            half = normed_moe_forward(self.mlp, self.post_attention_layernorm, attn_out, residual, md, backend.paths)
            return LayerOutput(hidden=half.hidden, residual=half.stream, layer_input=layer_input)
        normed, residual = self.post_attention_layernorm.add_and_norm(attn_out, residual)
        return LayerOutput(hidden=self.mlp(normed), residual=residual, layer_input=layer_input)


class DecoderLM(nn.Module):
    """Inference-only decoder. Parameters start uninitialized: call `load_weights` or `init_random_weights`."""

    def __init__(
        self,
        config: ModelConfig,
        attn_backend: AttentionBackend,
        dtype: torch.dtype = torch.bfloat16,
        device: torch.device | str = "cpu",
    ) -> None:
        super().__init__()
        self.config = config
        self.attn_backend = attn_backend
        self.dtype = dtype
        # Built on meta then materialized once, so an 8B model never exists twice or gets a throwaway init.
        with torch.device("meta"):
            self.embed_tokens = uninitialized_embedding(config.vocab_size, config.hidden_size)
            self.layers = nn.ModuleList(_decoder_layer(config, i) for i in range(config.num_hidden_layers))
            self.norm = _final_norm(config)
            self.lm_head = None if config.tie_word_embeddings else nn.Linear(
                config.hidden_size, config.vocab_size, bias=False
            )
        self.rotary = model_rotary(config)
        self.layer_kinds = LayerKinds.of(config.attention_kinds, config.num_hidden_layers)
        self.layer_kinds.require_backend(attn_backend)
        # Gemma-3: sliding-window (not full) layers rotate with their own base ([num_layers] which layers); else none.
        self.sliding_rotary = None if config.sliding_rope_theta is None else RotaryEmbedding(
            config.head_dim, config.sliding_rope_theta, None)
        self.is_sliding_rope = tuple(self.sliding_rotary is not None and not k.is_full for k in self.layer_kinds.kinds)
        # Gemma: embeddings times sqrt(hidden_size) rounded to the weights' dtype (as transformers multiplies by a
        # 0-dim tensor of that dtype); kept as that rounded Python float, so a forward makes no host-to-device copy
        # (CUDA-graph capture refuses one) and the product is the same (both compute in fp32 and round once).
        self.embed_scale = (float(torch.tensor(config.hidden_size ** 0.5, dtype=dtype)) if config.is_gemma
                            else config.embedding_multiplier)  # Granite-4's, a Python float as transformers'
        materialize_(self, dtype, device).requires_grad_(False)
        self.is_initialized = False

    @property
    def embed_weight(self) -> torch.Tensor:  # [vocab, hidden]
        return self.embed_tokens.weight

    @property
    def lm_head_weight(self) -> torch.Tensor:  # [vocab, hidden]; the embedding itself when tied
        return self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def kv_cache_spec(self) -> KVCacheSpec:
        c = self.config
        return KVCacheSpec(c.num_kv_layers, c.num_key_value_heads, c.head_dim, self.dtype)

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:  # [n] -> [n, hidden]
        x = self.embed_tokens(input_ids)
        if self.embed_scale is not None:
            x = x * self.embed_scale
        return x

    def reserve_rope(self, num_positions: int, device: torch.device) -> None:
        """Grow every RoPE table this model reads to `num_positions` (before a CUDA-graph capture)."""
        self.rotary.reserve(num_positions, device)
        if self.sliding_rotary is not None:
            self.sliding_rotary.reserve(num_positions, device)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:  # [n, hidden] -> [n, vocab] fp32
        logits = F.linear(hidden, self.lm_head_weight)
        if self.config.logits_scaling != 1.0:  # Granite-4: in the model's dtype, as transformers divides them
            logits = logits / self.config.logits_scaling
        cap = self.config.final_logit_softcapping
        if cap is not None:  # in the model's dtype, as transformers caps them
            logits = torch.tanh(logits / cap) * cap
        return logits.float()

    def forward(
        self,
        input_ids: torch.Tensor,  # [num_tokens]
        md: AttentionMetadata,
        kv_cache: KVCache,
        aux_layer_ids: tuple[int, ...] = (),
        phase: str = "target",
        check_metadata: bool = True,
    ) -> ModelOutput:
        """`aux_layer_ids` use HF `output_hidden_states` indices: 0 is the embeddings, i the input of layer i.

        Index num_layers is the last layer's output *before* the final norm (HF reports it after).
        `check_metadata=False` only under CUDA-graph capture: the graph runner checks each replay's real metadata.
        """
        if not self.is_initialized:
            raise RuntimeError("DecoderLM weights were never loaded")
        num_layers = self.config.num_hidden_layers
        bad = [i for i in aux_layer_ids if not 0 <= i <= num_layers]
        if bad:
            raise SpecbenchError(f"aux hidden-state layer ids {bad} out of range [0, {num_layers}]")
        # Every forward (each draft step and graph replay included) rebuilds its kinds' metadata from its own positions.
        md = self.layer_kinds.attach(md, phase)
        if self.config.is_hybrid:
            md = ensure_state_rows(self, md, kv_cache)
        if check_metadata:
            self.attn_backend.begin_forward(md, phase)
            if self.attn_backend.check_invariants:
                check_layer_kinds(md, self.layer_kinds.kinds, phase)
        cos_sin = self.rotary.cos_sin(md.positions, md.max_seq_len)
        sliding_cos_sin = None if self.sliding_rotary is None else self.sliding_rotary.cos_sin(
            md.positions, md.max_seq_len)
        hidden, residual = self.embed(input_ids), None
        captured: dict[int, torch.Tensor] = {}
        backend = self.attn_backend if check_metadata else UncheckedBackend(self.attn_backend)
        for i, layer in enumerate(self.layers):
            layer_cos_sin = sliding_cos_sin if self.is_sliding_rope[i] else cos_sin
            out = layer(hidden, residual, layer_cos_sin, kv_cache, md, backend)
            hidden, residual = out.hidden, out.residual
            if i in aux_layer_ids:
                captured[i] = out.layer_input
        normed, captured[num_layers] = self.norm.add_and_norm(hidden, residual)  # the last MLP add, fused
        aux = torch.cat([captured[i] for i in aux_layer_ids], dim=-1) if aux_layer_ids else None
        return ModelOutput(hidden_states=normed, aux_hidden_states=aux)

    def checkpoint_targets(self) -> dict[str, tuple[torch.Tensor, int, int]]:
        """HF checkpoint name -> (our parameter, first row, end row) it fills."""
        if self.config.architecture == NEMOTRON_H:
            return fused_checkpoint_targets(self, self.config, nemotron_checkpoint_name(self.config))
        final_norm = "final_layernorm." if self.config.architecture == BAMBA else "norm."  # Bamba's name for it
        return fused_checkpoint_targets(
            self, self.config, lambda name: name if name.startswith("lm_head.") else "model." + (
                final_norm + name[len("norm."):] if name.startswith("norm.") else name)
        )

    @torch.no_grad()
    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy HF-named tensors in, one at a time (so a streamed checkpoint is never held twice).

        Every parameter must be filled exactly; unknown names, missing names and shape
        mismatches raise SpecbenchError naming the key.
        """
        targets = self.checkpoint_targets()
        loaded: set[str] = set()
        c = self.config
        weights = permuted_for_rope(per_expert_names(weights, EXPERT_NAMES.get(c.architecture)), c.head_dim,
                                    c.rotary_dim)
        if c.is_multimodal_wrapper:
            weights = language_model_names(weights)
        if c.architecture == GPT_OSS:
            weights = gpt_oss_layout(weights)
        if c.architecture == NEMOTRON_H:
            weights = backbone_names(weights)
        if c.architecture == GRANITE_HYBRID:
            weights = granite_names(weights, has_experts=c.moe is not None)
        for name, tensor in weights:
            if name.endswith("rotary_emb.inv_freq") or self._is_mtp_layer(name):
                continue
            if name == "lm_head.weight" and self.lm_head is None:
                continue  # tied checkpoints sometimes store a copy of the embedding
            if name not in targets:
                raise SpecbenchError(
                    f"unexpected weight {name!r} in checkpoint for a {self.config.num_hidden_layers}-layer "
                    f"{self.config.architecture} model"
                )
            param, start, end = targets[name]
            dest = param[start:end]
            if dest.shape != tensor.shape:
                raise SpecbenchError(
                    f"weight {name!r} has shape {tuple(tensor.shape)}, the model expects {tuple(dest.shape)}"
                )
            dest.copy_(tensor)
            loaded.add(name)
        missing = sorted(targets.keys() - loaded)
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise SpecbenchError(f"checkpoint is missing weight {missing[0]!r}{more}")
        self.is_initialized = True

    def _is_mtp_layer(self, name: str) -> bool:
        """Multi-token-prediction weights are the `mtp` proposer's (speculation/mtp), not the target's: GLM-4.5 / DeepSeek-V3
        checkpoints carry them as layers after the decoder's, Qwen3-Next under `mtp.*`."""
        if name.startswith("mtp.") and self.config.num_mtp_modules > 0:
            return True
        match = re.match(r"model\.layers\.(\d+)\.", name)
        has_extra_layers = self.config.architecture == "glm4_moe" or self.config.num_mtp_modules > 0
        return has_extra_layers and match is not None and int(match.group(1)) >= self.config.num_hidden_layers

    @torch.no_grad()
    def init_random_weights(self, seed: int = 0, std: float = 0.02) -> None:
        """Seeded N(0, std) matrices, unit norms, zero biases.

        std 0.02 (HF's initializer_range) keeps every projection output O(1) at 8B widths
        (0.02 * sqrt(4096) ~ 1.3), so 32+ layers of residual sums stay far inside bf16 range.
        """
        gen = torch.Generator(device=self.embed_weight.device).manual_seed(seed)
        fill_dummy_weights(self, gen, std)
        self.is_initialized = True


def model_rotary(config: ModelConfig) -> RotaryEmbedding:
    """The RoPE table of the model's (full-attention) layers: Qwen3-Next rotates the first partial_rotary_dim dims
    itself (models/qwen3_next.py), so a table that wide; else head_dim wide, GLM's partial dims as rotary_dim."""
    if config.partial_rotary_dim is not None:
        return RotaryEmbedding(config.partial_rotary_dim, config.rope_theta, config.rope_scaling)
    return RotaryEmbedding(config.head_dim, config.rope_theta, config.rope_scaling, config.rotary_dim)


def _final_norm(config: ModelConfig) -> nn.Module:
    if config.has_offset_norms:
        return OffsetRMSNorm(config.hidden_size, config.rms_norm_eps)
    if config.architecture == NEMOTRON_H:  # `norm_f`, weight multiplied in fp32 (models/nemotron_h.py)
        return Fp32WeightRMSNorm(config.hidden_size, config.rms_norm_eps)
    return RMSNorm(config.hidden_size, config.rms_norm_eps)


def _decoder_layer(config: ModelConfig, layer_idx: int) -> nn.Module:
    if config.architecture == NEMOTRON_H:
        kv_layer, state_layer = kv_layer_ids(config)[layer_idx], state_layer_ids(config)[layer_idx]
        return NemotronHLayer(config, config.nemotron_blocks[layer_idx],
                              None if kv_layer is None else SelfAttention(config, kv_layer), state_layer)
    if config.architecture == GRANITE_HYBRID:
        kv_layer, state_layer = kv_layer_ids(config)[layer_idx], state_layer_ids(config)[layer_idx]
        attention = None if kv_layer is None else SelfAttention(config, kv_layer)
        return GraniteHybridDecoderLayer(config, layer_idx, attention, state_layer)
    if config.architecture == BAMBA:
        kv_layer, state_layer = kv_layer_ids(config)[layer_idx], state_layer_ids(config)[layer_idx]
        return BambaDecoderLayer(config, None if kv_layer is None else SelfAttention(config, kv_layer), state_layer)
    if config.is_hybrid:
        return HybridDecoderLayer(config, layer_idx, state_layer_ids(config)[layer_idx],
                                  kv_layer_ids(config)[layer_idx])
    if config.is_gemma:
        return GemmaDecoderLayer(config, SelfAttention(config, layer_idx))
    return DecoderLayer(config, layer_idx)


def fused_checkpoint_targets(
    module: nn.Module, config: ModelConfig, checkpoint_name: Callable[[str], str] = lambda name: name
) -> dict[str, tuple[torch.Tensor, int, int]]:
    """Checkpoint name -> (parameter, first row, end row) for every parameter of `module`.

    Fused qkv_proj / gate_up_proj parameters are filled from the separate q/k/v and gate/up tensors that
    checkpoints store; `checkpoint_name` maps our parameter path to the checkpoint's (e.g. adds "model.").
    """
    c = config
    fused = {
        # q rows None: what k and v leave (q_size; twice it in Qwen3-Next's gated attention, [q | gate] per head)
        "self_attn.qkv_proj": [("self_attn.q_proj", None), ("self_attn.k_proj", c.kv_size),
                               ("self_attn.v_proj", c.kv_size)],
        "mlp.gate_up_proj": [("mlp.gate_proj", c.intermediate_size), ("mlp.up_proj", c.intermediate_size)],
        # Nemotron-H's attention blocks (models/nemotron_h.py)
        "mixer.qkv_proj": [("mixer.q_proj", c.q_size), ("mixer.k_proj", c.kv_size), ("mixer.v_proj", c.kv_size)],
        # Bamba's dense MLP (models/bamba.py)
        "feed_forward.gate_up_proj": [("feed_forward.gate_proj", c.intermediate_size),
                                      ("feed_forward.up_proj", c.intermediate_size)],
    }
    targets: dict[str, tuple[torch.Tensor, int, int]] = {}
    moe_prefixes = tuple(f"{path}." for path, m in module.named_modules() if isinstance(m, MoeMLP))
    for prefix in moe_prefixes:
        layer_prefix = prefix.removesuffix("mlp.")  # "layers.N."
        moe = module.get_submodule(prefix[:-1])
        moe_targets = gpt_oss_checkpoint_targets(moe, layer_prefix) if config.architecture == GPT_OSS else (
            moe_checkpoint_targets(moe, layer_prefix, EXPERT_NAMES[config.architecture]))
        targets.update({checkpoint_name(name): target for name, target in moe_targets.items()})
    for name, param in module.named_parameters():
        if name.startswith(moe_prefixes):
            continue
        path, _, leaf = name.rpartition(".")
        fused_path = next((f for f in fused if path.endswith(f)), None)
        if fused_path is None:
            targets[checkpoint_name(name)] = (param, 0, param.shape[0])
            continue
        owner = path[: -len(fused_path)]  # "layers.N."
        parts = fused[fused_path]
        start = 0
        for part, rows in parts:
            if rows is None:
                rows = param.shape[0] - sum(r for _, r in parts if r is not None)
            targets[checkpoint_name(f"{owner}{part}.{leaf}")] = (param, start, start + rows)
            start += rows
    return targets
