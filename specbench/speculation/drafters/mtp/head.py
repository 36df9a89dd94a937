"""The MTP module as a draft head with its own paged KV: the EAGLE proposer's interface
(speculation/drafters/eagle/head.py).

One step at position p: x = eh_proj([enorm(embedding of the token at p + 1); hnorm(hidden at p)]) (embedding first,
as DeepSeek-V3, GLM-4.5 and Qwen3-Next store eh_proj / fc), then one decoder layer of the target's shapes (MoE when
the target's layers are), then the final norm (`shared_head.norm` / `mtp.norm`); the target's lm_head reads it.
The normed output is also the hidden the next step is fed (as transformers' MtpLayer post_norm and SGLang chain it).

On a Qwen3-Next (hybrid) target the module's layer is one of its full-attention blocks (gated attention, partial
RoPE, (1 + w) norms, the target's dense or MoE MLP; models/qwen3_next.py) and its four norms are (1 + w) too: no
recurrent state, so the module attends its own paged KV as every other MTP module does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from specbench.attention.metadata import AttentionMetadata
from specbench.errors import SpecbenchError
from specbench.kv.kv_cache import KVCache, KVCacheSpec
from specbench.models import fused_kernels
from specbench.models.config import ModelConfig
from specbench.models.config_hybrid import QWEN3_NEXT
from specbench.models.dummy_weights import fill_dummy_weights
from specbench.models.layers import OffsetRMSNorm, RMSNorm
from specbench.models.llama import DecoderLayer, fused_checkpoint_targets, model_rotary
from specbench.models.materialize import materialize_
from specbench.models.qwen3_next import HybridDecoderLayer
from specbench.speculation.drafters.eagle import fused_head
from specbench.speculation.drafters.eagle.head import HeadOutput


@dataclass(frozen=True)
class MtpHeadConfig:
    # The MTP decoder layers' shapes: the target's, one layer per module (KV layer i is module i's; MoE iff the
    # target has MoE), every layer full attention (a hybrid target's: no Gated DeltaNet, no state slots).
    layer: ModelConfig
    # Qwen3-Next's module (a hybrid target's): its layer is the target's gated full-attention block, its norms (1 + w)
    is_qwen3_next: bool = False


def mtp_head_config(target: ModelConfig, num_modules: int = 1) -> MtpHeadConfig:
    is_qwen3_next = target.architecture == QWEN3_NEXT  # its kinds: Gated DeltaNet or full, never a window
    if target.attention_kinds and not is_qwen3_next:  # the module's forward attends causally over its whole cache
        raise SpecbenchError("--method mtp on a target with sliding-window attention layers is not supported")
    is_moe = target.moe is not None
    layer = replace(target, num_hidden_layers=num_modules, moe_layer_ids=tuple(range(num_modules)) if is_moe else (),
                    num_mtp_modules=0, attention_kinds=(), gated_delta_net=None)
    return MtpHeadConfig(layer, is_qwen3_next)


# execution_paths.py: recorded where the module's layer is Qwen3-Next's block (declared by mtp/proposer.py's class)
QWEN3_NEXT_BLOCK_PATH = "mtp.qwen3_next_block"


class MtpHead(fused_kernels.UsesFusedKernels, nn.Module):
    """Parameters start uninitialized (meta -> empty): the loader fills them. Its fused policy (set_policy) covers
    eh_proj and its norms (speculation/drafters/eagle/fused_head.py); the decoder layer takes decode_gemv like the
    target's."""

    is_eagle3 = False  # the EAGLE round graphs' question: the catch-up buffer holds H-wide hidden states

    def __init__(self, config: MtpHeadConfig, attn_backend, dtype: torch.dtype, device: torch.device | str,
                 module_index: int = 0) -> None:
        super().__init__()
        c = config.layer
        self.config = config
        self.module_index = module_index  # which MTP module (DeepSeek-V3's depth k - 1): its KV layer
        self.attn_backend = attn_backend
        self.dtype = dtype
        norm = OffsetRMSNorm if config.is_qwen3_next else RMSNorm
        with torch.device("meta"):
            self.enorm = norm(c.hidden_size, c.rms_norm_eps)
            self.hnorm = norm(c.hidden_size, c.rms_norm_eps)
            self.eh_proj = nn.Linear(2 * c.hidden_size, c.hidden_size, bias=False)
            # KV layer `module_index` of the modules' shared cache; named layers.0 as the checkpoint's canonical names
            layer = (HybridDecoderLayer(c, module_index, state_layer=None, kv_layer=module_index)
                     if config.is_qwen3_next else DecoderLayer(c, module_index))
            self.layers = nn.ModuleList([layer])
            self.final_norm = norm(c.hidden_size, c.rms_norm_eps)
        self.rotary = model_rotary(c)  # the target's RoPE
        materialize_(self, dtype, device).requires_grad_(False)
        self.eh_norm_weight = fused_head.NormPairWeight()  # [enorm; hnorm] weights, fused path
        self.target_embed: torch.Tensor | None = None  # [vocab, H] the target's, shared by reference
        self.target_lm_head: torch.Tensor | None = None  # [vocab, H] the target's (= shared_head.head)
        # The target's own vocabulary: no draft-to-target id map (EagleHead's d2t). The EAGLE proposer's masked
        # drafting of constrained requests reads it (the selftest's constrained rows crashed on MTP without it).
        self.draft_to_target: torch.Tensor | None = None

    def bind_target(self, embed_weight: torch.Tensor, lm_head_weight: torch.Tensor) -> None:
        self.target_embed = embed_weight.detach()
        self.target_lm_head = lm_head_weight.detach()

    def kv_cache_spec(self) -> KVCacheSpec:
        c = self.config.layer
        return KVCacheSpec(c.num_hidden_layers, c.num_key_value_heads, c.head_dim, self.dtype)  # every module's

    def project_target_features(self, features: torch.Tensor) -> torch.Tensor:  # [n, H] -> [n, H]
        return features  # the target's hidden goes through hnorm inside forward

    def forward(
        self,
        input_ids: torch.Tensor,  # [n] the token at p + 1 (catch-up) or the previous draft (steps)
        hidden: torch.Tensor,  # [n, H] the target's final hidden at p, or the module's own previous output
        md: AttentionMetadata,
        kv_cache: KVCache,
        phase: str,
        check_metadata: bool = True,  # False only under CUDA-graph capture (replays check the real metadata)
    ) -> HeadOutput:
        if check_metadata:
            self.attn_backend.begin_forward(md, phase)
        if self.config.is_qwen3_next:
            self.attn_backend.paths.record(QWEN3_NEXT_BLOCK_PATH)
        cos_sin = self.rotary.cos_sin(md.positions, md.max_seq_len)
        embeds = F.embedding(input_ids, self.target_embed)
        # The fused pair of norms multiplies by w itself: (1 + w) norms (Qwen3-Next) stay eager.
        if not self.config.is_qwen3_next and fused_head.projects(self.fused_policy, self.eh_proj, hidden):
            x = fused_head.project_norm_pair(self.eh_proj.weight, embeds, hidden, self.enorm, self.hnorm,
                                             self.eh_norm_weight)
        else:
            x = self.eh_proj(torch.cat([self.enorm(embeds), self.hnorm(hidden)], dim=-1))  # embedding first
        fused_head.record_first_layer(self.layers[0], x, self.attn_backend.paths)
        out = self.layers[0](x, None, cos_sin, kv_cache, md, self.attn_backend)
        normed, _ = self.final_norm.add_and_norm(out.hidden, out.residual)  # the layer's last residual add
        return HeadOutput(hidden=normed, logits_input=normed)

    def compute_logits(self, logits_input: torch.Tensor) -> torch.Tensor:  # [n, H] -> [n, vocab] fp32
        return F.linear(logits_input, self.target_lm_head).float()

    def to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:  # [n] the MTP drafts in the target's vocab
        return draft_ids

    def checkpoint_targets(self) -> dict[str, tuple[torch.Tensor, int, int]]:
        """Canonical MTP name (checkpoint.py) -> (our parameter, first row, end row) it fills."""
        return fused_checkpoint_targets(self, self.config.layer)

    @torch.no_grad()
    def init_random_weights(self, seed: int, std: float = 0.02) -> None:
        """Dummy weights (`--load-format dummy` targets): seeded N(0, std) matrices, unit norms, zero biases."""
        gen = torch.Generator(device=self.eh_proj.weight.device).manual_seed(seed)
        fill_dummy_weights(self, gen, std)
