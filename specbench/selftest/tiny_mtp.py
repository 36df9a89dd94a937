"""A tiny target that ships an MTP module, in a dialect's real key names, built from the target's own weights.

The module's decoder layer is a copy of the target's first layer of its kind (full attention: a hybrid target's
first attention layer; MoE on a MoE target), enorm and hnorm the identity (weights one, or zero where the norms are
(1 + w) as Qwen3-Next's), the final norm the target's, and eh_proj passes the embedding through beside a small term
over the hidden (like the selftest's EAGLE-1 fc), so a fault feeding the wrong hidden changes the drafts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from specbench.models.config_hybrid import QWEN3_5_TEXT_MODELS, QWEN3_NEXT
from specbench.speculation.drafters.mtp.checkpoint import LAYER_INDEX, MTP_PREFIX

HIDDEN_GAIN = 0.04  # eh_proj weight on hnorm(hidden) (RMS 1), next to the embedding's identity: small, as the
# EAGLE-1 head's, so fp32 rounding in the target features stays far inside the oracle's tolerance


def mtp_tensors(weights: dict[str, torch.Tensor], num_layers: int, dialect: str,
                seed: int, module: int = 0, offset_norms: bool = False) -> dict[str, torch.Tensor]:
    """Module `module`'s tensors under the dialect's names (layer-index: model.layers.{num_layers + module}.*; else
    mtp.*, one module). A later module copies the next target layer (module 1: layer 1 on the dense targets), so
    modules differ by far more than rounding: a step run by the wrong module shows in the oracle. `offset_norms`:
    the checkpoint stores norm weights as w of (1 + w) (Qwen3-Next), so the identity norm is zeros."""
    hidden = weights["model.embed_tokens.weight"].shape[1]
    gen = torch.Generator().manual_seed(3_000_017 + seed + 7919 * module)  # never replays a build seed's stream
    mix = torch.randn(hidden, hidden, generator=gen) * (HIDDEN_GAIN / hidden**0.5)
    ones = torch.zeros(hidden) if offset_norms else torch.ones(hidden)  # the identity norm's weight
    source = f"model.layers.{min(_source_layer(weights, num_layers) + module, num_layers - 1)}."
    layer = {n.removeprefix(source): t.clone() for n, t in weights.items() if n.startswith(source)}
    fc = torch.cat([torch.eye(hidden), mix], dim=1)  # [H, embedding H + hidden H]
    final_norm = weights["model.norm.weight"].clone()
    if dialect == LAYER_INDEX:
        prefix = f"model.layers.{num_layers + module}."
        named = {"enorm.weight": ones, "hnorm.weight": ones.clone(), "eh_proj.weight": fc,
                 "shared_head.norm.weight": final_norm, **layer}
        return {prefix + n: t for n, t in named.items()}
    named = {"pre_fc_norm_embedding.weight": ones, "pre_fc_norm_hidden.weight": ones.clone(), "fc.weight": fc,
             "norm.weight": final_norm, **{f"layers.0.{n}": t for n, t in layer.items()}}
    return {"mtp." + n: t for n, t in named.items()}


def _source_layer(weights: dict[str, torch.Tensor], num_layers: int) -> int:
    """The target layer the module's decoder layer copies: the first of the kind the module has (full attention: a
    hybrid's Gated DeltaNet layers have no self_attn; MoE on a MoE target). On the dense selftest targets layer 0 over
    the next token's embedding drafts ~0.2-0.3 first-position acceptance; the last layer, which expects layer 0's
    stream, ~0.02."""
    attention = [i for i in range(num_layers) if f"model.layers.{i}.self_attn.q_proj.weight" in weights]
    moe = [i for i in attention if f"model.layers.{i}.mlp.gate.weight" in weights]
    return (moe or attention)[0]


def build_mtp_target(target_dir: str | Path, out_dir: str | Path, dialect: str, seed: int = 0,
                     num_modules: int = 1) -> str:
    """Copy `target_dir` (one model.safetensors) to `out_dir` with `num_modules` MTP modules added in `dialect`
    (several: layer-index only, DeepSeek-V3's num_nextn_predict_layers)."""
    src, out = Path(target_dir), Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(src, out)
    config = json.loads((src / "config.json").read_text())
    weights = load_file(src / "model.safetensors")
    base = dict(weights)
    offset_norms = config.get("model_type") in (QWEN3_NEXT, *QWEN3_5_TEXT_MODELS)  # (1 + w) norms
    for module in range(num_modules):
        weights.update(mtp_tensors(base, config["num_hidden_layers"], dialect, seed, module, offset_norms))
    config["num_nextn_predict_layers" if dialect == LAYER_INDEX else "mtp_num_hidden_layers"] = num_modules
    (out / "config.json").write_text(json.dumps(config, indent=2))
    save_file({k: v.contiguous() for k, v in weights.items()}, out / "model.safetensors", metadata={"format": "pt"})
    return str(out)


__all__ = ["LAYER_INDEX", "MTP_PREFIX", "build_mtp_target", "mtp_tensors"]
