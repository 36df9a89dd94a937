"""The MoE layer shapes the expert-kernel benchmarks (scripts/bench_moe.py, bench_moe_kernels.py) and the real-shape
kernel tests run: the presets' own routed-expert configs (one declaration, models/presets.py), and tiny ones for
CPU crash runs under the Triton interpreter."""

from __future__ import annotations

from specbench.models.moe_config import MoeConfig
from specbench.models.presets import get_preset

REAL_SHAPE_PRESETS = ("qwen3-30b-a3b", "gpt-oss-20b")

TINY_SHAPES = {
    "tiny-qwen3": MoeConfig(hidden_size=64, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=48),
    "tiny-gpt-oss": MoeConfig(hidden_size=64, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=64,
                              scoring="topk_softmax", norm_topk_prob=False, has_router_bias=True,
                              has_expert_bias=True, activation="swiglu_oai"),
}


def real_shapes() -> dict[str, MoeConfig]:
    """Preset name -> its MoE layer config (Qwen3-30B-A3B, gpt-oss-20b)."""
    shapes = {name: get_preset(name).moe for name in REAL_SHAPE_PRESETS}
    assert all(config is not None for config in shapes.values()), "a real-shape preset lost its MoE config"
    return shapes


def preset_shape(name: str) -> MoeConfig | None:
    """Any registered preset's routed-expert config (e.g. a hybrid's: qwen3-next-80b-a3b), None if it has none."""
    from specbench.models.presets import MODEL_PRESETS

    return get_preset(name).moe if name in MODEL_PRESETS else None
