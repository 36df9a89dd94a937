"""Which layers of a Hugging Face MoE config route over experts, and how (the MoeConfig of those layers).

Qwen3-MoE: a layer is sparse unless listed in `mlp_only_layers`, and then only every `decoder_sparse_step`-th
one ((i + 1) % step == 0), as transformers builds it; the others keep a dense MLP of `intermediate_size`.
Routing is softmax top-k, renormalised when `norm_topk_prob`, no shared expert.
Mixtral: every layer is sparse, each expert `intermediate_size` wide; softmax top-k, always renormalised.
GLM-4.5: layers from `first_k_dense_replace` on are sparse; sigmoid scores, top-k chosen with the score-correction
bias, renormalised when `norm_topk_prob`, times `routed_scaling_factor`; `n_shared_experts` experts' worth of
ungated shared MLP. Group-limited selection (n_group, topk_group > 1, DeepSeek-V3) is refused.

Granite-4 (GraniteMoeHybrid): every layer sparse when `num_local_experts` > 0; top-k of the logits softmaxed over
those k; an ungated shared MLP beside the experts.

Architectures whose MoE needs what the engine's attention lacks are refused by name with the reason
(`REFUSED_ARCHITECTURES`), so a user reads one line rather than a list of supported names.
"""

from __future__ import annotations

from specbench.errors import SpecbenchError
from specbench.models.config_shape import HFConfigShape
from specbench.models.moe_config import MoeConfig

MOE_ARCHITECTURES = ("qwen3_moe", "mixtral", "glm4_moe", "gpt_oss", "qwen3_next", "granitemoehybrid")

# HF architecture -> why the engine cannot run it yet (none today: kept for the next such architecture).
REFUSED_ARCHITECTURES: dict[str, str] = {}


def moe_from_hf(architecture: str, shape: HFConfigShape) -> tuple[MoeConfig | None, tuple[int, ...]]:
    """(the routed-expert MLP, the ids of the layers that use it); (None, ()) for a dense architecture."""
    if architecture not in MOE_ARCHITECTURES:
        return None, ()
    if architecture == "glm4_moe":
        return _glm4_moe(shape)
    if architecture == "gpt_oss":
        return _gpt_oss(shape)
    if architecture == "granitemoehybrid":
        return _granite_hybrid(shape)
    num_experts = _num_experts(shape)
    if num_experts == 0:
        return None, ()
    is_mixtral = architecture == "mixtral"
    required = ("num_experts_per_tok",) if is_mixtral else ("num_experts_per_tok", "moe_intermediate_size")
    missing = [name for name in required if getattr(shape, name) is None]
    if missing:
        raise SpecbenchError(f"model config is missing required field {missing[0]!r} (mixture of experts)")
    moe = MoeConfig(
        hidden_size=shape.hidden_size,
        num_experts=num_experts,
        num_experts_per_tok=shape.num_experts_per_tok,
        moe_intermediate_size=shape.intermediate_size if is_mixtral else shape.moe_intermediate_size,
        scoring="softmax",
        norm_topk_prob=is_mixtral or bool(shape.norm_topk_prob),
        # Qwen3-Next: one sigmoid-gated shared expert beside the routed ones (as Qwen2-MoE)
        shared_intermediate_size=_qwen3_next_shared(architecture, shape),
        is_shared_expert_gated=architecture == "qwen3_next",
    )
    if is_mixtral:
        return moe, tuple(range(shape.num_hidden_layers))
    dense = set(shape.mlp_only_layers)
    step = shape.decoder_sparse_step
    layer_ids = tuple(i for i in range(shape.num_hidden_layers) if i not in dense and (i + 1) % step == 0)
    return (moe, layer_ids) if layer_ids else (None, ())


def _glm4_moe(shape: HFConfigShape) -> tuple[MoeConfig | None, tuple[int, ...]]:
    if shape.n_group != 1 or shape.topk_group != 1:
        raise SpecbenchError(f"group-limited expert selection (n_group {shape.n_group}, topk_group "
                             f"{shape.topk_group}) is not supported; GLM-4.5 routes with n_group = topk_group = 1")
    missing = [name for name in ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")
               if getattr(shape, name) is None]
    if missing:
        raise SpecbenchError(f"model config is missing required field {missing[0]!r} (mixture of experts)")
    moe = MoeConfig(
        hidden_size=shape.hidden_size,
        num_experts=shape.n_routed_experts,
        num_experts_per_tok=shape.num_experts_per_tok,
        moe_intermediate_size=shape.moe_intermediate_size,
        scoring="sigmoid",
        norm_topk_prob=shape.norm_topk_prob is not False,
        routed_scaling_factor=shape.routed_scaling_factor,
        has_score_correction_bias=True,
        shared_intermediate_size=shape.n_shared_experts * shape.moe_intermediate_size,
    )
    layer_ids = tuple(range(shape.first_k_dense_replace, shape.num_hidden_layers))
    return (moe, layer_ids) if layer_ids else (None, ())


def _gpt_oss(shape: HFConfigShape) -> tuple[MoeConfig, tuple[int, ...]]:
    """Every layer: router with bias, softmax over the top-k logits, experts of `intermediate_size` with biases and
    the clamped SwiGLU (models/moe_config.py)."""
    if shape.num_experts_per_tok is None:
        raise SpecbenchError("model config is missing required field 'num_experts_per_tok' (mixture of experts)")
    moe = MoeConfig(
        hidden_size=shape.hidden_size,
        num_experts=_num_experts(shape),
        num_experts_per_tok=shape.num_experts_per_tok,
        moe_intermediate_size=shape.intermediate_size,
        scoring="topk_softmax",
        norm_topk_prob=False,
        has_router_bias=True,
        has_expert_bias=True,
        activation="swiglu_oai",
        swiglu_alpha=shape.swiglu_alpha or 1.702,
        swiglu_limit=shape.swiglu_limit or 7.0,
    )
    return moe, tuple(range(shape.num_hidden_layers))


def _granite_hybrid(shape: HFConfigShape) -> tuple[MoeConfig | None, tuple[int, ...]]:
    """Granite-4: every layer, experts of `intermediate_size`, the top k of the router logits softmaxed over those k,
    an ungated shared MLP of `shared_intermediate_size` beside them; none (the shared MLP alone) at 0 experts."""
    num_experts = shape.num_local_experts if shape.num_local_experts is not None else 8  # transformers' default
    if num_experts == 0:
        return None, ()
    moe = MoeConfig(
        hidden_size=shape.hidden_size,
        num_experts=num_experts,
        num_experts_per_tok=shape.num_experts_per_tok or 2,
        moe_intermediate_size=shape.intermediate_size,
        scoring="topk_softmax",
        norm_topk_prob=False,
        shared_intermediate_size=getattr(shape, "shared_intermediate_size", None) or 1024,
    )
    return moe, tuple(range(shape.num_hidden_layers))


def _num_experts(shape: HFConfigShape) -> int:
    old, new = shape.num_experts, shape.num_local_experts
    if old is not None and new is not None and old != new:
        raise SpecbenchError(f"model config fields 'num_experts' ({old}) and 'num_local_experts' ({new}) disagree")
    value = old if old is not None else new
    if value is None:
        raise SpecbenchError("model config is missing required field 'num_experts' (mixture of experts)")
    return value


def _qwen3_next_shared(architecture: str, shape: HFConfigShape) -> int:
    if architecture != "qwen3_next":
        return 0
    width = getattr(shape, "shared_expert_intermediate_size", None)
    if not isinstance(width, int) or width < 1:
        raise SpecbenchError("model config field 'shared_expert_intermediate_size' must be a positive integer "
                             f"(Qwen3-Next's gated shared expert), got {width!r}")
    return width
