"""Write an EAGLE head directory (config.json + weights) in any dialect the loader reads, from canonical-name tensors.

One writer for every head specbench builds: the selftest's (selftest/tiny_eagle.py), the random performance head
(dummy.py) and the test suite's fitted heads in each checkpoint variant. Canonical names are the loader's
(`fc.weight`, `layers.{i}.*`, `norm.weight`, `lm_head.weight`, `embed_tokens.weight`, `d2t`, `t2d`); the native
EAGLE-3 dialect stores `layers.*` as `midlayer.*` (one layer) or `midlayer.{i}.*`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from specbench.speculation.drafters.eagle.checkpoint import native_file_name
from specbench.speculation.drafters.eagle.config import EAGLE1, EAGLE3_NATIVE, EAGLE3_SPECULATORS


@dataclass(frozen=True)
class HeadFormat:
    """How a head is written: the dialect and the variant fields real checkpoints of that dialect differ in."""

    dialect: str  # EAGLE1 | EAGLE3_NATIVE | EAGLE3_SPECULATORS
    weights_file: str = "model.safetensors"  # or pytorch_model.bin (loading it needs allow_pickle)
    config_bias: bool | None = None  # EAGLE-1 config "bias"; None = omitted (the reference's default: True)
    aux_field: str = "top"  # native EAGLE-3 aux ids: "top" (hidden_states indices) | "nested" (eagle_config, layer
    # outputs) | "absent" (the loader's default applies)
    architectures_marker: bool = True  # native EAGLE-3: declare LlamaForCausalLMEagle3


@dataclass(frozen=True)
class HeadLayout:
    """What the config says about the head beyond its decoder-layer fields."""

    layer: dict  # HF Llama fields of the head's decoder layers (num_hidden_layers = the head's layer count)
    aux_hf_indices: tuple[int, ...] = ()  # EAGLE-3: target hidden_states indices the head reads
    draft_vocab_size: int | None = None  # EAGLE-3; None = the layer's vocab_size
    norm_before_residual: bool = False  # speculators only (native heads never normalise before the residual)
    norm_output: bool = False  # speculators only


def write_eagle_head(out_dir: str | Path, tensors: dict[str, torch.Tensor], layout: HeadLayout,
                     fmt: HeadFormat) -> Path:
    out = Path(out_dir)
    layer = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **layout.layer}
    draft_vocab = layout.draft_vocab_size or layer["vocab_size"]
    if fmt.dialect == EAGLE1:
        config = dict(layer) if fmt.config_bias is None else {**layer, "bias": fmt.config_bias}
    elif fmt.dialect == EAGLE3_NATIVE:
        config = _native_config(layer, draft_vocab, layout.aux_hf_indices, fmt)
        num_layers = layer["num_hidden_layers"]
        tensors = {native_file_name(k, num_layers): v for k, v in tensors.items()}
    elif fmt.dialect == EAGLE3_SPECULATORS:
        config = _speculators_config(layer, draft_vocab, layout)
    else:
        raise ValueError(f"unknown EAGLE dialect {fmt.dialect!r}; supported: {EAGLE1}, {EAGLE3_NATIVE}, "
                         f"{EAGLE3_SPECULATORS}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    tensors = {k: v.contiguous() for k, v in tensors.items()}
    if fmt.weights_file.endswith(".bin"):
        torch.save(tensors, out / fmt.weights_file)
    else:
        from safetensors.torch import save_file

        save_file(tensors, out / fmt.weights_file, metadata={"format": "pt"})
    return out


def _native_config(layer: dict, draft_vocab_size: int, aux_hf_indices: tuple[int, ...], fmt: HeadFormat) -> dict:
    arch = "LlamaForCausalLMEagle3" if fmt.architectures_marker else "LlamaForCausalLM"
    config = {**layer, "architectures": [arch], "draft_vocab_size": draft_vocab_size}
    if fmt.aux_field == "nested":  # SGLang/SpecForge: layer-output ids, hidden_states index - 1
        config["eagle_config"] = {
            "eagle_aux_hidden_state_layer_ids": [i - 1 for i in aux_hf_indices], "use_aux_hidden_state": True,
            "use_input_layernorm_in_first_layer": True, "use_last_layernorm": True, "next_layer_regular": True,
            "parallel_draft_step": 1,
        }
    elif fmt.aux_field == "top":
        config["eagle_aux_hidden_state_layer_ids"] = list(aux_hf_indices)
    return config


def _speculators_config(layer: dict, draft_vocab_size: int, layout: HeadLayout) -> dict:
    return {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "speculators_version": "0.1.0",
        "speculators_config": {
            "algorithm": "eagle3",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3, "verifier_accept_k": 1,
                                  "accept_tolerance": 0.0}],
            "default_proposal_method": "greedy",
            "verifier": {"name_or_path": "specbench-built", "architectures": ["LlamaForCausalLM"]},
        },
        "transformer_layer_config": layer,
        "draft_vocab_size": draft_vocab_size,
        "norm_before_residual": layout.norm_before_residual,
        "norm_output": layout.norm_output,
        "target_hidden_size": None,
        "eagle_aux_hidden_state_layer_ids": list(layout.aux_hf_indices),
    }
