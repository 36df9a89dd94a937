"""An EAGLE-1 head for the selftest's tiny target, built from the target's own weights (no fitting, no hub).

EAGLE-1 runs its layers (the first without input norm) over fc([embedding of token p + 1, feature p]) at position
p, then the target's lm_head. The target's unit-RMS embeddings and all-ones layer-0 input norm and final norm
(tiny.py) make a head with the target's layers and an fc passing the embedding through predict as the target does
at p + 1, but for the first token, which it never sees. A small fc term over the feature keeps the hidden path live,
so a fault feeding the wrong hidden changes the drafts.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from specbench.speculation.drafters.eagle.config import EAGLE1
from specbench.speculation.drafters.eagle.writer import HeadFormat, HeadLayout, write_eagle_head

FEATURE_GAIN = 0.04  # fc weight on the target feature (RMS 1), next to the embedding's identity


def eagle1_tensors(target_dir: str | Path, seed: int) -> dict[str, torch.Tensor]:
    """Canonical-name tensors (`fc.weight`, `layers.{i}.*`); embedding and lm_head are the target's, not shipped."""
    weights = load_file(Path(target_dir) / "model.safetensors")
    hidden = weights["model.embed_tokens.weight"].shape[1]
    gen = torch.Generator().manual_seed(2_000_003 + seed)  # never replays a build seed's stream
    feature = torch.randn(hidden, hidden, generator=gen) * (FEATURE_GAIN / hidden**0.5)
    tensors = {"fc.weight": torch.cat([torch.eye(hidden), feature], dim=1)}  # [H, embedding H + feature H]
    for name, tensor in weights.items():
        # An EAGLE-1 head is a plain Llama layer stack: a Qwen3 variant's q/k norms stay behind (its drafts then
        # agree with the target less often, which the acceptance baselines record).
        is_qk_norm = ".self_attn.q_norm." in name or ".self_attn.k_norm." in name
        if name.startswith("model.layers.") and name != "model.layers.0.input_layernorm.weight" and not is_qk_norm:
            tensors[name.removeprefix("model.")] = tensor.clone()
    return tensors


def build_tiny_eagle1_head(target_dir: str | Path, out_dir: str | Path, seed: int) -> str:
    """Write the EAGLE-1 head directory (plain Llama config, the target's layer fields) for `target_dir`."""
    target = json.loads((Path(target_dir) / "config.json").read_text())
    layer = {k: v for k, v in target.items() if k not in ("architectures", "model_type")}
    return str(write_eagle_head(out_dir, eagle1_tensors(target_dir, seed), HeadLayout(layer),
                                HeadFormat(EAGLE1, config_bias=False)))  # bias: the fc bias (none)
