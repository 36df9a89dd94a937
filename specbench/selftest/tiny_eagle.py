"""An EAGLE-1 head for the selftest's tiny target, built from the target's own weights (no fitting, no hub):
greedy acceptance at k = 3 ~0.8 / 0.6 / 0.4 on check prompts, ~0.7 / 0.4 / 0.3 on random token prompts.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from specbench.selftest.tiny import perturb_

FEATURE_GAIN = 0.04  # fc weight on the target feature (RMS 1), next to the embedding's identity
HEAD_NOISE = 0.0  # the head is exact but for the missing first token and the feature term


def eagle1_tensors(target_dir: str | Path, *, seed: int = 0, noise: float = HEAD_NOISE) -> dict[str, torch.Tensor]:
    """Canonical-name tensors (`fc.weight`, `layers.{i}.*`) of the head, perturbed by `noise`.

    EAGLE-1 runs its layers (the first without input norm) over fc([embedding of token p + 1, feature p]) at
    position p, then the target's lm_head. The target's unit-RMS embeddings and all-ones layer-0 input norm and
    final norm (tiny.py) make a head with the target's layers and an fc passing the embedding through predict
    as the target does at p + 1, but for the first token, which it never sees. A small fc term over the feature
    keeps the hidden path live, so a fault feeding the wrong hidden changes the drafts.
    """
    weights = load_file(Path(target_dir) / "model.safetensors")
    hidden = weights["model.embed_tokens.weight"].shape[1]
    gen = torch.Generator().manual_seed(2_000_003 + seed)
    feature = torch.randn(hidden, hidden, generator=gen) * (FEATURE_GAIN / hidden**0.5)
    tensors = {"fc.weight": torch.cat([torch.eye(hidden), feature], dim=1)}  # [H, embedding H + feature H]
    for name, tensor in weights.items():
        if name.startswith("model.layers.") and name != "model.layers.0.input_layernorm.weight":
            tensors[name.removeprefix("model.")] = tensor.clone()
    if noise:
        perturb_([tensors[k] for k in sorted(tensors)], noise, seed)
    return tensors


def build_tiny_eagle_head(target_dir: str | Path, out_dir: str | Path, *, seed: int = 0,
                          noise: float = HEAD_NOISE) -> str:
    """Write an EAGLE-1 head directory (plain Llama config.json, `bias: false`) for `target_dir`; return its path."""
    target_cfg = json.loads((Path(target_dir) / "config.json").read_text())
    config = {**target_cfg, "architectures": ["LlamaForCausalLM"], "bias": False}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    tensors = eagle1_tensors(target_dir, seed=seed, noise=noise)
    save_file({k: v.contiguous() for k, v in tensors.items()}, out / "model.safetensors", metadata={"format": "pt"})
    return str(out)
