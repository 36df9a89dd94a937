"""Each layer's attention kind from HF configs: Mistral windows every layer, Qwen2/3 the layers from
max_window_layers on when use_sliding_window is set, `layer_types` lists them (alternating local/global)."""

from __future__ import annotations

import pytest

from specbench.attention.kinds import FullAttention, SlidingWindowAttention
from specbench.errors import SpecbenchError
from specbench.models import ModelConfig

BASE = {"vocab_size": 64, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 4,
        "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 128}
MISTRAL = {**BASE, "architectures": ["MistralForCausalLM"], "model_type": "mistral"}
QWEN2 = {**BASE, "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}
W, F = SlidingWindowAttention(8), FullAttention()


@pytest.mark.parametrize("hf, kinds", [
    ({**MISTRAL, "sliding_window": 8}, (W,) * 4),
    ({**MISTRAL, "sliding_window": None}, ()),
    ({**MISTRAL, "sliding_window": 128}, ()),  # as long as any sequence: no key is ever hidden
    ({**QWEN2, "sliding_window": 8}, ()),  # Qwen applies its window only with use_sliding_window
    ({**QWEN2, "sliding_window": 8, "use_sliding_window": True, "max_window_layers": 2}, (F, F, W, W)),
    ({**QWEN2, "sliding_window": 8, "use_sliding_window": True}, ()),  # transformers' default max_window_layers 28
    ({**QWEN2, "sliding_window": 8, "use_sliding_window": True,
      "layer_types": ["sliding_attention", "full_attention"] * 2}, (W, F, W, F)),
    ({**QWEN2, "sliding_window": 8, "use_sliding_window": True, "layer_types": ["full_attention"] * 4}, ()),
    ({**BASE, "architectures": ["LlamaForCausalLM"], "model_type": "llama"}, ()),
])
def test_layer_kinds_from_hf(hf, kinds):
    assert ModelConfig.from_hf(hf).attention_kinds == kinds


@pytest.mark.parametrize("layer_types, message", [
    (["sliding_attention"] * 3, "'layer_types' lists 3 layers, the model has 4"),
    (["chunked_attention"] * 4, ("unsupported attention layer type 'chunked_attention'; supported: "
                                 "full_attention, linear_attention, sliding_attention")),
])
def test_bad_layer_types_are_one_error(layer_types, message):
    with pytest.raises(SpecbenchError, match=message):
        ModelConfig.from_hf({**MISTRAL, "sliding_window": 8, "layer_types": layer_types})
