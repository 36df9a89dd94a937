"""The selftest's sliding-window + mixture-of-experts tiny target (issue 27): a Qwen3-MoE whose every layer is windowed
(`use_sliding_window`: transformers' Qwen3-MoE and specbench both window all layers then, as Mistral does) and whose
MLPs are routed experts, written as an HF directory with the hub's per-expert key names, and a draft LM perturbed
from it (the same architecture: its draft steps and catch-up run windowed, where the draft-side window bugs live).

It starts from the seed's "qwen3" tiny target (tiny.py: no biases, q/k norm, the positional heads), so the window
shows in the output: the previous-token head and the content heads attend within WINDOW keys, shorter than every
selftest prompt (5..30 tokens) and than prompt + k, so a window one key too wide or missing changes the next token.
Each layer's dense MLP becomes NUM_EXPERTS experts, top-TOP_K, renormalised (norm_topk_prob): expert 0 is the dense
MLP, the others fresh random matrices of the same gain; the router's logits spread ~2 so tokens pick different pairs
and every expert serves some token of a batch. No expert writes the constant coordinate (tiny.py's bias column).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from specbench.selftest.tiny import (
    CONST_DIM,
    DRAFT_NOISES,
    HIDDEN,
    NUM_LAYERS,
    VOCAB_SIZE,
    _add_positional_heads,
    _random_weights,
    _without_biases,
    perturb_,
    tiny_llama_config,
    variant_shape,
)

TARGET = "window_moe"  # the selftest's name for this target (rows, baselines)
BASE_VARIANT = "qwen3"  # tiny.py's variant it starts from: q/k norm, as Qwen3-MoE has
WINDOW = 4  # keys a query sees per layer (itself included): shorter than the shortest selftest prompt (5)
NUM_EXPERTS, TOP_K = 4, 2
MOE_INTERMEDIATE = 2 * HIDDEN  # each expert as wide as the dense MLP it replaces
ROUTER_GAIN = 2.0  # router logits' std over unit-RMS inputs: decisive picks, yet every expert gets tokens
EXPERT_GAIN = 1.0  # gain of the experts' matrices but expert 0's (tiny.py's MLP_GAIN for the dense MLP)
_MLP = ("gate_proj", "up_proj", "down_proj")


def window_moe_config(vocab_size: int = VOCAB_SIZE) -> dict:
    """The HF config.json of the target and of its draft LM."""
    base = tiny_llama_config(vocab_size, BASE_VARIANT)
    return {**base, "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
            "use_sliding_window": True, "sliding_window": WINDOW, "max_window_layers": 0,
            "num_experts": NUM_EXPERTS, "num_experts_per_tok": TOP_K, "moe_intermediate_size": MOE_INTERMEDIATE,
            "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": []}


def _with_experts(weights: dict[str, torch.Tensor], seed: int) -> dict[str, torch.Tensor]:
    """The dense MLP of each layer as routed experts (per-expert names, as the hub's Qwen3-MoE checkpoints)."""
    gen = torch.Generator().manual_seed(4_000_037 + seed)  # never replays a build seed's stream
    out = {k: v for k, v in weights.items() if ".mlp." not in k}
    for i in range(NUM_LAYERS):
        mlp = f"model.layers.{i}.mlp."
        out[f"{mlp}gate.weight"] = torch.randn(NUM_EXPERTS, HIDDEN, generator=gen) * (ROUTER_GAIN / HIDDEN**0.5)
        for e in range(NUM_EXPERTS):
            for proj in _MLP:
                dense = weights[f"{mlp}{proj}.weight"]
                w = dense.clone() if e == 0 else torch.randn(dense.shape, generator=gen) * (EXPERT_GAIN
                                                                                             / dense.shape[1] ** 0.5)
                if proj == "down_proj":
                    w[CONST_DIM] = 0.0  # the stream keeps the constant (tiny.py)
                out[f"{mlp}experts.{e}.{proj}.weight"] = w
    return out


def _write(out_dir: Path, weights: dict[str, torch.Tensor], vocab_size: int) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(window_moe_config(vocab_size), indent=2))
    save_file({k: v.contiguous() for k, v in weights.items()}, out_dir / "model.safetensors", metadata={"format": "pt"})


def build_window_moe_pair(out_dir: str | Path, *, seed: int = 0, noise: float | None = None,
                          vocab_size: int = VOCAB_SIZE) -> tuple[str, str]:
    """Write `target/` and `draft/` (weights perturbed by `noise`, by default the base variant's) as fp32 HF
    directories."""
    shape = variant_shape(BASE_VARIANT)
    noise = DRAFT_NOISES[BASE_VARIANT] if noise is None else noise
    out = Path(out_dir)
    weights = _random_weights(vocab_size, seed, shape)
    _add_positional_heads(weights, shape)
    weights = _with_experts(_without_biases(weights, BASE_VARIANT), seed)
    _write(out / "target", weights, vocab_size)
    perturb_([weights[k] for k in sorted(weights)], noise, seed)
    _write(out / "draft", weights, vocab_size)
    return str(out / "target"), str(out / "draft")
