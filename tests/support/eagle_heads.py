"""EAGLE heads for the tiny test targets, written in every real checkpoint dialect.

Each head is fitted once to its target (eagle_heads_fit.py) and cached under <repo>/.cache/eagle_heads/,
keyed by the fitting recipe and the target's weights. Variants then write the same fitted tensors in
their on-disk format: EAGLE-1 (.bin or safetensors, with/without fc bias), EAGLE-3 native (`midlayer.*`,
LlamaForCausalLMEagle3, nested eagle_config or top-level aux ids) and EAGLE-3 speculators, through the
library's one head writer (speculation/drafters/eagle/writer.py) that the selftest's head and the dummy head use too.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from tests.support.eagle_heads_fit import FitRecipe, fit_head, random_head_tensors
from safetensors.torch import load_file, save_file
from tests.support.tiny_models import REPO_ROOT, build_tiny_model

from specbench.speculation.drafters.eagle.config import EAGLE1, EAGLE3_NATIVE, EAGLE3_SPECULATORS
from specbench.speculation.drafters.eagle.writer import HeadFormat, HeadLayout, write_eagle_head

MAX_TOKENS = 24
# 26 blocks of 4 tokens cannot hold 4 concurrent requests of up to 40 + 24 + k tokens: forces preemption.
PREEMPTING_KV_BLOCKS = 26
CACHE_DIR = REPO_ROOT / ".cache" / "eagle_heads"
# name -> (build_tiny_model kwargs, residual growth per layer). In tiny_models the token embedding dominates
# the residual stream, so consecutive layers' hidden states are nearly parallel (cosine ~0.98) and a head
# reading the neighbouring layers would not notice. As in real LMs, the residual norm here grows with depth:
# layer i's attention and MLP outputs are scaled by growth ** (i + 1), so each layer's state is distinct.
TARGETS = {"t2": (dict(num_layers=2, seed=0), 1.0), "t4": (dict(num_layers=4, seed=3), 3.0)}
AUX_HF_INDICES = (1, 2, 4)  # of the 4-layer target: low, mid, and the last layer's (pre-norm) output
RECIPES = {
    "e1-bias": FitRecipe("eagle1", fc_bias=True),
    "e1-nobias": FitRecipe("eagle1", fc_bias=False),
    "e3-native": FitRecipe("eagle3", draft_vocab_size=512, aux_hf_indices=AUX_HF_INDICES, rope_theta=20000.0),
    "e3-spec": FitRecipe("eagle3", norm_before_residual=True, aux_hf_indices=AUX_HF_INDICES, rope_theta=20000.0),
    # For the 2-layer MoE targets (tests/models/test_moe_eagle.py): embeddings, the second layer's input
    # and output; fewer prompts and steps keep its one-off fit short.
    "e3-moe": FitRecipe("eagle3", norm_before_residual=True, aux_hf_indices=(0, 1, 2), num_prompts=128, steps=150),
}


@dataclass(frozen=True)
class HeadVariant:
    target: str  # key of TARGETS
    recipe: str  # key of RECIPES
    method: str  # engine method: eagle | eagle3
    fmt: HeadFormat  # dialect and on-disk variant
    own_embed: bool = False  # ship a copy of the target's embedding as embed_tokens.weight

    @property
    def dialect(self) -> str:
        return self.fmt.dialect


VARIANTS = {
    "eagle1-bias-bin": HeadVariant("t2", "e1-bias", "eagle", HeadFormat(EAGLE1, weights_file="pytorch_model.bin")),
    "eagle1-nobias": HeadVariant("t2", "e1-nobias", "eagle", HeadFormat(EAGLE1, config_bias=False), own_embed=True),
    "eagle3-native-nested": HeadVariant("t4", "e3-native", "eagle3", HeadFormat(EAGLE3_NATIVE, aux_field="nested")),
    "eagle3-native-flat": HeadVariant("t4", "e3-native", "eagle3",
                                      HeadFormat(EAGLE3_NATIVE, architectures_marker=False)),
    "eagle3-speculators": HeadVariant("t4", "e3-spec", "eagle3", HeadFormat(EAGLE3_SPECULATORS)),
}


def build_target(root: Path, name: str) -> Path:
    out = root / name
    if not (out / "config.json").exists():
        kwargs, growth = TARGETS[name]
        build_tiny_model(out, "llama", **kwargs)
        if growth != 1.0:
            weights = load_file(out / "model.safetensors")
            for i in range(kwargs["num_layers"]):
                for proj in ("self_attn.o_proj", "mlp.down_proj"):
                    weights[f"model.layers.{i}.{proj}.weight"] *= growth ** (i + 1)
            save_file(weights, out / "model.safetensors", metadata={"format": "pt"})
    return out


def _weights_digest(target_dir: Path) -> str:
    h = hashlib.sha256()
    for key, tensor in sorted(load_file(target_dir / "model.safetensors").items()):
        h.update(key.encode())
        h.update(tensor.contiguous().numpy().tobytes())
    return h.hexdigest()


def fitted_tensors(target_dir: Path, recipe_name: str) -> dict[str, torch.Tensor]:
    """Canonical-name tensors of the head fitted for `recipe_name` on this target (cached on disk)."""
    recipe = RECIPES[recipe_name]
    key = hashlib.sha256((recipe.key() + _weights_digest(target_dir)).encode()).hexdigest()[:24]
    path = CACHE_DIR / f"{recipe_name}-{key}.safetensors"
    if path.exists():
        return load_file(path)
    tensors = fit_head(str(target_dir), recipe)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=CACHE_DIR, suffix=".tmp")
    os.close(fd)
    save_file({k: v.contiguous() for k, v in tensors.items()}, tmp)
    os.replace(tmp, path)  # atomic: concurrent workers never read a half-written file
    return tensors


def unfitted_tensors(target_dir: Path, recipe_name: str) -> dict[str, torch.Tensor]:
    """Random tensors shaped like the recipe's head (no fitting): for load-validation tests."""
    from specbench.models.loader import read_config

    return random_head_tensors(read_config(target_dir / "config.json"), RECIPES[recipe_name])


def layer_config(target_dir: Path, recipe: FitRecipe) -> dict:
    """The head's decoder-layer config as real heads ship it (plain Llama fields, old-style rope_theta)."""
    t = json.loads((target_dir / "config.json").read_text())
    keys = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "vocab_size", "rms_norm_eps", "max_position_embeddings", "bos_token_id", "eos_token_id")
    return {**{k: t[k] for k in keys}, "num_hidden_layers": 1, "hidden_act": "silu",
            "rope_theta": recipe.rope_theta, "tie_word_embeddings": False, "torch_dtype": "float32"}


def write_head(out_dir: Path, tensors: dict[str, torch.Tensor], variant: HeadVariant, target_dir: Path) -> Path:
    recipe = RECIPES[variant.recipe]
    tensors = dict(tensors)
    if variant.own_embed:
        tensors["embed_tokens.weight"] = load_file(target_dir / "model.safetensors")["model.embed_tokens.weight"]
    layout = HeadLayout(layer_config(target_dir, recipe), aux_hf_indices=recipe.aux_hf_indices,
                        draft_vocab_size=recipe.draft_vocab_size or None,
                        norm_before_residual=recipe.norm_before_residual)
    return write_eagle_head(out_dir, tensors, layout, variant.fmt)


def build_head_dir(root: Path, variant_name: str, target_dir: Path) -> Path:
    """Fit (or load from cache) the variant's head and write it under root/variant_name."""
    variant = VARIANTS[variant_name]
    out = root / variant_name
    if not (out / "config.json").exists():
        write_head(out, fitted_tensors(target_dir, variant.recipe), variant, target_dir)
    return out


def run_engine(target: Path, prompts, **kwargs):
    """A 4-way concurrent fp32 CPU engine over `prompts`, greedy, MAX_TOKENS each; returns (llm, outputs)."""
    from specbench import LLM, SamplingParams

    llm = LLM(str(target), dtype="fp32", device="cpu", block_size=4, max_concurrency=4, allow_pickle=True, **kwargs)
    outs = llm.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    return llm, outs


def acceptance_per_pos(outs) -> list[float]:
    """Per draft position: rounds that accepted it / rounds that drafted it, over all requests."""
    num_pos = len(outs[0].stats.num_drafted_per_pos)
    drafted = [sum(o.stats.num_drafted_per_pos[i] for o in outs) for i in range(num_pos)]
    accepted = [sum(o.stats.num_accepted_per_pos[i] for o in outs) for i in range(num_pos)]
    return [a / d if d else 0.0 for a, d in zip(accepted, drafted)]
