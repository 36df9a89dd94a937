"""INV-SCORE (debug invariant): a layer with sinks, soft-capping or its own scale, attended as it declares.

The backend's output for such a layer is recomputed by the torch reference from the cache and the layer's own
ScoreParams (its sink parameters, its scale and cap); a path that drops the sinks or the cap, or scales with the
default, lands far outside the rounding tolerance. The window comes from the metadata: INV-KIND checks that.
"""

from __future__ import annotations

import torch

from specbench.attention.invariant_violation import InvariantViolation
from specbench.attention.metadata import AttentionMetadata
from specbench.attention.score_params import ScoreParams
from specbench.attention.torch_ref import paged_attention_reference
from specbench.kv.kv_cache import KVCache

# dtype -> (atol, rtol) between a kernel and the reference; fp32 kernels agree to ~1e-6.
_TOLERANCE = {torch.float32: (1e-4, 1e-3), torch.float16: (2e-2, 2e-2), torch.bfloat16: (4e-2, 4e-2)}


def check_score_params(
    layer: int,
    q: torch.Tensor,  # [num_tokens, num_heads, head_dim] the queries the backend attended with
    out: torch.Tensor,  # [num_tokens, num_heads, head_dim] what it returned
    kv_cache: KVCache,
    md: AttentionMetadata,
    score: ScoreParams,  # what the layer declares
) -> None:
    if q.is_cuda and torch.cuda.is_current_stream_capturing():
        return  # the replayed graph's forwards are checked eagerly elsewhere; nothing to read back in a capture
    k_cache, v_cache = kv_cache.flat(layer)
    window = md.key_window(layer)
    starts = None if window is None else window.window_starts
    expected = paged_attention_reference(q, k_cache, v_cache, md, window_starts=starts, sinks=score.sinks,
                                         softcap=score.softcap, scale=score.scale)
    atol, rtol = _TOLERANCE.get(q.dtype, (4e-2, 4e-2))
    real = md.slot_mapping >= 0  # padding rows of a graph batch attend to nothing in particular
    diff = (out.float() - expected.float())[real].abs()
    bound = atol + rtol * expected.float()[real].abs()
    if bool((diff > bound).any()):
        worst = float(diff.max())
        raise InvariantViolation(
            f"layer {layer}: INV-SCORE violated: attention output differs from the reference with the layer's own "
            f"scale {score.scale}, softcap {score.softcap} and {'sinks' if score.sinks is not None else 'no sinks'} "
            f"by {worst:.3g} (sinks, soft-cap or scale not applied on this path)")
