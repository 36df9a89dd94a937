"""Nemotron-H's config.json (transformers' NemotronHConfig, NVIDIA's original `hybrid_override_pattern` one): one
mixer per HF block, 'M' Mamba-2, '*' attention (no RoPE), '-' a non-gated relu^2 MLP, 'E' MoE (refused).

The engine's layers are the mixers ('M' and '*'): each takes the MLP blocks that follow it up to the next mixer
(and the first also those before it), so every engine layer has one kind (Mamba-2 or full attention) and the state
and K/V layer counting is Bamba's. `ModelConfig.nemotron_blocks` keeps each layer's HF blocks as pattern letters,
from which the checkpoint's layer indices and the parameter count follow.
"""

from __future__ import annotations

import math

from specbench.errors import SpecbenchError
from specbench.recurrent.mamba2_config import Mamba2Config, json_float

NEMOTRON_H = "nemotron_h"
MAMBA, ATTENTION, MLP, MOE = "M", "*", "-", "E"
_LETTERS = {"linear_attention": MAMBA, "mamba": MAMBA, "full_attention": ATTENTION, "attention": ATTENTION,
            "mlp": MLP, "moe": MOE}


def block_pattern(hf: dict) -> str:
    """The HF blocks as pattern letters: `hybrid_override_pattern`, else `layers_block_type` (transformers >= 5)."""
    pattern = hf.get("hybrid_override_pattern")
    if pattern is None:
        types = hf.get("layers_block_type") or hf.get("layer_types")
        if not isinstance(types, list) or not all(t in _LETTERS for t in types):
            raise SpecbenchError(f"model config field 'layers_block_type' must list layer types among "
                                 f"{sorted(_LETTERS)}, got {types!r}")
        pattern = "".join(_LETTERS[t] for t in types)
    if not isinstance(pattern, str) or not pattern or set(pattern) - {MAMBA, ATTENTION, MLP, MOE}:
        raise SpecbenchError(f"model config field 'hybrid_override_pattern' must be a string of M, *, - and E, "
                             f"got {pattern!r}")
    if MOE in pattern:
        raise SpecbenchError("Nemotron-H MoE blocks ('E' in hybrid_override_pattern, Nemotron-3 Nano and later) are "
                             "not supported; the dense Nemotron-H checkpoints (M, * and - blocks) are")
    if not set(pattern) & {MAMBA, ATTENTION}:
        raise SpecbenchError(f"hybrid_override_pattern {pattern!r} has no Mamba-2 ('M') or attention ('*') block")
    return pattern


def group_blocks(pattern: str) -> tuple[str, ...]:
    """Each engine layer's HF blocks: a mixer and the MLP blocks after it (the first layer also those before)."""
    groups: list[str] = []
    lead = ""
    for letter in pattern:
        if letter == MLP:
            if groups:
                groups[-1] += letter
            else:
                lead += letter
        else:
            groups.append(lead + letter)
            lead = ""
    return tuple(groups)


def nemotron_h_shape_fields(hf: dict) -> dict:
    """The config with the Llama-family names validated_shape reads: num_hidden_layers (the engine's layers, one per
    mixer), rms_norm_eps (layer_norm_epsilon), head_dim (NVIDIA's attention_head_dim)."""
    relu2 = hf.get("mlp_hidden_act", "relu2")
    if relu2 != "relu2":
        raise SpecbenchError(f"unsupported Nemotron-H mlp_hidden_act {relu2!r}; supported: relu2")
    if hf.get("mamba_hidden_act", "silu") != "silu":
        raise SpecbenchError(f"unsupported Nemotron-H mamba_hidden_act {hf['mamba_hidden_act']!r}; supported: silu")
    out = dict(hf, num_hidden_layers=len(group_blocks(block_pattern(hf))))
    out["rms_norm_eps"] = hf.get("layer_norm_epsilon", 1e-5)  # transformers' default
    if hf.get("head_dim") is None and hf.get("attention_head_dim") is not None:
        out["head_dim"] = hf["attention_head_dim"]
    out["attention_bias"] = False  # transformers' NemotronHAttention has no biases whatever the config says
    return out


def _positive(hf: dict, names: tuple[str, ...], default: int | None = None) -> int:
    value = next((hf[n] for n in names if hf.get(n) is not None), default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SpecbenchError(f"model config field {names[0]!r} must be a positive integer, got {value!r}")
    return value


def nemotron_h_mamba2(hf: dict) -> Mamba2Config:
    """The Mamba-2 mixers' shape: mamba_num_heads heads of mamba_head_dim (their product the intermediate size, not
    expand * hidden_size), n_groups B/C groups; in_proj/out_proj biases are `use_bias`, the conv's `use_conv_bias`."""
    num_heads = _positive(hf, ("mamba_num_heads",), 128)
    head_dim = _positive(hf, ("mamba_head_dim",), 64)
    limit = [json_float(v) for v in hf.get("time_step_limit") or hf.get("mamba_dt_limit") or (0.0, math.inf)]
    if len(limit) != 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in limit):
        raise SpecbenchError(f"model config field 'time_step_limit' must be [low, high], got {limit!r}")
    return Mamba2Config(
        num_heads=num_heads, head_dim=head_dim, num_groups=_positive(hf, ("n_groups", "mamba_n_groups"), 8),
        state_size=_positive(hf, ("ssm_state_size",), 128), conv_kernel_size=_positive(hf, ("conv_kernel",
                                                                                             "mamba_d_conv"), 4),
        intermediate_size=num_heads * head_dim,
        has_conv_bias=bool(next((hf[n] for n in ("use_conv_bias", "mamba_conv_bias") if n in hf), True)),
        has_proj_bias=bool(hf.get("use_bias", False)), time_step_limit=(float(limit[0]), float(limit[1])))


def nemotron_h_num_params(config) -> int:
    """Parameters of a Nemotron-H ModelConfig (as transformers counts them): embeddings, each block's norm and mixer,
    the final norm, the output head."""
    h = config.hidden_size
    attn = h * (config.q_size + 2 * config.kv_size) + config.q_size * h
    mlp = 2 * h * config.intermediate_size + (config.intermediate_size + h if config.mlp_bias else 0)
    sizes = {MAMBA: config.mamba2.num_params(h), ATTENTION: attn, MLP: mlp}
    blocks = "".join(config.nemotron_blocks)
    return (config.vocab_size * h * (1 if config.tie_word_embeddings else 2) + sum(sizes[b] + h for b in blocks)
            + h)
