"""The draft heads' input side on the fused projections (kernels/gemv.py), as the target's layers run them.

What a head adds to a decoder block is its input: EAGLE-3's fc over the target's aux states and its first layer's
2H-wide q/k/v over [input_layernorm(embedding), hidden_norm(hidden)]; EAGLE-1's fc over [embedding, hidden];
MTP's eh_proj over [enorm(embedding), hnorm(hidden)]. Eagerly those are cuBLAS GEMMs with norm, concat, RoPE and
K/V-store kernels around them. Here, at 1 to 64 tokens:
- the paired norms ride in the projection at one token (two RMS side by side, gemv's `norm_split`) and run as
  the fused norm kernel from two tokens (as decode_gemv does for a block's norm);
- EAGLE-3's q/k/v also rotates q and k and stores K/V (gemv_rope.py); o_proj, the MLP and their residual adds
  are decode_gemv.block_tail;
- fc and eh_proj are gemv projections (a bias rides as a broadcast residual).
The eager layers (head.py, mtp/head.py) stay the reference; tests/eagle/test_eagle_fused_head.py compares them.
"""

from __future__ import annotations

import torch
from torch import nn

from specbench.models import decode_gemv, fused_kernels
from specbench.models.layers import RMSNorm
from specbench.models.llama import LayerOutput
from specbench.models.qwen3_next import HybridDecoderLayer

# execution_paths.py: recorded where the head's first decoder layer takes the fused projections (its input
# projection, fc / eh_proj, goes with it whenever it can)
FUSED_HEAD_PATH = "eagle.fused_head"


def first_layer_fuses(layer, x: torch.Tensor) -> bool:
    """Whether a head's first layer takes the fused projections on x ([n, H] its input): a DecoderLayer or EAGLE-3's
    first layer where decode_gemv applies; never the gated-attention block of a Qwen3-Next MTP module (its q_proj
    carries the output gate, its norms are (1 + w): the eager layer only)."""
    return not isinstance(layer, HybridDecoderLayer) and decode_gemv.applies(layer, x)


def record_first_layer(layer, x: torch.Tensor, paths) -> None:
    """EAGLE-1's and MTP's first layer is a DecoderLayer (it records its proj.* path itself); x [n, H] its input;
    paths: the engine's PathRecorder. EAGLE-3's first layer records in its own forward."""
    if first_layer_fuses(layer, x):
        paths.record(FUSED_HEAD_PATH)


class NormPairWeight:
    """[norm_a.weight; norm_b.weight], concatenated once per weight version (a load or an in-place update makes a
    new one; a CUDA graph's eager warm-up fills it before capture, so a capture allocates nothing)."""

    def __init__(self) -> None:
        self._key: tuple[int, int, int, int] | None = None
        self._weight: torch.Tensor | None = None  # [size_a + size_b]

    def __call__(self, norm_a: RMSNorm, norm_b: RMSNorm) -> torch.Tensor:
        a, b = norm_a.weight, norm_b.weight
        key = (a.data_ptr(), a._version, b.data_ptr(), b._version)
        if key != self._key:
            self._weight, self._key = torch.cat([a.detach(), b.detach()]), key
        return self._weight


def projects(policy: str, linear: nn.Linear, x: torch.Tensor) -> bool:
    """Whether `linear` on x ([num_tokens, in]) runs as a gemv: shapes, dtypes and the policy only (no values)."""
    return (x.dtype == linear.weight.dtype and fused_kernels.use_fused(policy, x)
            and 1 <= x.shape[0] <= fused_kernels.gemv_max_tokens())


def project(linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:  # [num_tokens, in] -> [num_tokens, out]
    """linear(x) as one gemv (callers check `projects`); a bias is added as a broadcast residual."""
    bias = None if linear.bias is None else linear.bias.expand(x.shape[0], -1)
    return fused_kernels.gemv(x, linear.weight, residual=bias)


def project_norm_pair(
    weight: torch.Tensor,  # [out, size_a + size_b]
    x_a: torch.Tensor,  # [num_tokens, size_a]
    x_b: torch.Tensor,  # [num_tokens, size_b]
    norm_a: RMSNorm,
    norm_b: RMSNorm,
    pair_weight: NormPairWeight,
) -> torch.Tensor:  # [num_tokens, out] = [norm_a(x_a), norm_b(x_b)] @ weight.T
    """MTP's eh_proj: both norms in the projection at one token, the fused norm kernels from two."""
    if x_a.shape[0] == 1:
        return fused_kernels.gemv(torch.cat([x_a, x_b], dim=-1), weight, norm_weight=pair_weight(norm_a, norm_b),
                                  eps=norm_a.eps, norm_split=x_a.shape[-1])
    return fused_kernels.gemv(torch.cat([norm_a(x_a), norm_b(x_b)], dim=-1), weight)


def eagle3_first_layer(
    layer,  # specbench.speculation.drafters.eagle.head.Eagle3FirstLayer, where decode_gemv.applies(layer, hidden)
    embeds: torch.Tensor,  # [num_tokens, H]
    hidden: torch.Tensor,  # [num_tokens, H]
    cos_sin: torch.Tensor,  # [num_tokens, 2, head_dim] fp32
    kv_cache,
    md,
    backend,
) -> LayerOutput:
    """[input_layernorm(embeds), hidden_norm(hidden)] -> q/k/v + RoPE + K/V store -> attention -> block_tail."""
    h = hidden.shape[-1]
    layer_input = layer.hidden_norm(hidden) if layer.norm_before_residual else hidden  # the residual stream
    if hidden.shape[0] == 1:  # both norms ride in the projection
        x = torch.cat([embeds, hidden], dim=-1)
        norm_weight = layer.qkv_norm_weight(layer.input_layernorm, layer.hidden_norm)
        attn_out = decode_gemv.project_and_attend(layer.self_attn, x, cos_sin, kv_cache, md, backend, norm_weight,
                                                  layer.hidden_norm.eps, norm_split=h)
    else:
        normed_hidden = layer_input if layer.norm_before_residual else layer.hidden_norm(hidden)
        x = torch.cat([layer.input_layernorm(embeds), normed_hidden], dim=-1)  # embedding first
        attn_out = decode_gemv.project_and_attend(layer.self_attn, x, cos_sin, kv_cache, md, backend)
    stream = decode_gemv.block_tail(layer, attn_out, layer_input)
    return LayerOutput(hidden=stream, residual=None, layer_input=layer_input)
