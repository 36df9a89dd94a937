"""Each layer's attention kind, from a Hugging Face config: `layer_types` when given, else the architecture's rule.

- Mistral / Mixtral: `sliding_window` w, when not null, windows every layer.
- Qwen2 / Qwen3: `sliding_window` applies only with `use_sliding_window`, to layers >= `max_window_layers`
  (transformers' default `layer_types` for them).
- `layer_types` (transformers >= 4.53; Gemma-2/3, gpt-oss, Qwen): per layer, one of the HF layer types an attention
  kind stands for (`AttentionKind.hf_layer_types`: "full_attention", "sliding_attention"); any other fails, listing
  the supported ones, whether or not a window applies.
- gpt-oss / Gemma-2 / Gemma-3 without `layer_types`: transformers' default pattern, every n-th layer global (i + 1) % n == 0,
  n = 2 (gpt-oss, Gemma-2) or `sliding_window_pattern` (Gemma-3, default 6).
A window at least `max_position_embeddings` long never hides a key, and a window switched off hides none: then every
layer is full attention.
"""

from __future__ import annotations

from specbench.attention.kinds import AttentionKind, kind_of_hf_layer_type
from specbench.errors import SpecbenchError
from specbench.models.config_shape import HFConfigShape

_ALWAYS_WINDOWED = ("mistral", "mixtral")  # model types whose `sliding_window` needs no `use_sliding_window`
_QWEN = ("qwen2", "qwen3")
_QWEN_MAX_WINDOW_LAYERS = 28  # transformers' default for Qwen2/3 configs that do not say
_GLOBAL_EVERY = {"gpt_oss": 2, "gemma2": 2, "gemma3_text": 6}  # model type -> default: every n-th layer is full attention


def attention_kinds_from_hf(shape: HFConfigShape) -> tuple[AttentionKind, ...]:
    """[num_hidden_layers] kinds, or () when every layer is full attention."""
    num_layers = shape.num_hidden_layers
    for layer_type in dict.fromkeys(shape.layer_types or ()):
        kind_of_hf_layer_type(layer_type)  # an unknown layer type fails here, never runs as full attention
    is_qwen = shape.model_type in _QWEN
    global_every = _GLOBAL_EVERY.get(shape.model_type or "")
    enabled = bool(shape.use_sliding_window) if is_qwen or shape.use_sliding_window is not None else (
        shape.model_type in _ALWAYS_WINDOWED or shape.layer_types is not None or global_every is not None)
    window = shape.sliding_window if enabled else None
    if window is None or window >= shape.max_position_embeddings:
        return ()
    layer_types = shape.layer_types
    if layer_types is None and global_every is not None:
        every = shape.sliding_window_pattern or global_every if shape.model_type == "gemma3_text" else global_every
        layer_types = ["full_attention" if (i + 1) % every == 0 else "sliding_attention" for i in range(num_layers)]
    if layer_types is None:
        max_window_layers = _QWEN_MAX_WINDOW_LAYERS if shape.max_window_layers is None else shape.max_window_layers
        first = max_window_layers if is_qwen else 0
        layer_types = ["sliding_attention" if i >= first else "full_attention"
                       for i in range(num_layers)]
    if len(layer_types) != num_layers:
        raise SpecbenchError(f"model config field 'layer_types' lists {len(layer_types)} layers, "
                             f"the model has {num_layers}")
    kinds = tuple(kind_of_hf_layer_type(t).from_hf(window) for t in layer_types)
    return () if all(k.is_full for k in kinds) else kinds
