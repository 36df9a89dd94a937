"""Dialect detection, per-dialect defaults and aux-layer resolution (pure functions, no models)."""

from __future__ import annotations

import pytest

from specbench.config import parse_layer_ids
from specbench.config import EngineConfig
from specbench.errors import SpecbenchError
from specbench.speculation.drafters.eagle.aux_layers import resolve_aux_layers
from specbench.speculation.drafters.eagle.checkpoint import canonical_name, file_name_for
from specbench.speculation.drafters.eagle.config import (
    EAGLE1, EAGLE3_NATIVE, EAGLE3_SPECULATORS, HIDDEN_STATES_INDEX, LAYER_OUTPUT, AuxLayerSpec, parse_head_config,
)

LLAMA = {"model_type": "llama", "vocab_size": 1024, "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6,
         "rope_theta": 30000.0}
EAGLE1_KEYS = ["fc.weight", "layers.0.self_attn.q_proj.weight"]
NATIVE_KEYS = ["fc.weight", "midlayer.hidden_norm.weight", "d2t"]


def test_eagle1_defaults_to_a_biased_fc():
    cfg = parse_head_config(LLAMA, EAGLE1_KEYS)
    assert (cfg.dialect, cfg.method, cfg.fc_bias, cfg.aux) == (EAGLE1, "eagle", True, None)
    assert parse_head_config({**LLAMA, "bias": False}, EAGLE1_KEYS).fc_bias is False


@pytest.mark.parametrize("hf, keys", [
    ({**LLAMA, "architectures": ["LlamaForCausalLMEagle3"]}, ["fc.weight"]),
    (LLAMA, ["fc.weight", "d2t"]),
    (LLAMA, ["fc.weight", "midlayer.self_attn.q_proj.weight"]),
])
def test_native_eagle3_markers(hf, keys):
    cfg = parse_head_config({**hf, "draft_vocab_size": 256}, keys)
    assert (cfg.dialect, cfg.method, cfg.norm_before_residual, cfg.draft_vocab_size) == (EAGLE3_NATIVE, "eagle3",
                                                                                          False, 256)
    assert cfg.layer.rope_theta == 30000.0  # RoPE comes from the head's own config


def test_speculators_defaults_norm_before_residual_to_true():
    hf = {"speculators_model_type": "eagle3", "transformer_layer_config": LLAMA, "draft_vocab_size": 512,
          "eagle_aux_hidden_state_layer_ids": [1, 5, 9]}
    cfg = parse_head_config(hf, ["layers.0.hidden_norm.weight"])
    assert (cfg.dialect, cfg.norm_before_residual, cfg.draft_vocab_size) == (EAGLE3_SPECULATORS, True, 512)
    assert cfg.aux == AuxLayerSpec((1, 5, 9), "eagle_aux_hidden_state_layer_ids", HIDDEN_STATES_INDEX)
    assert parse_head_config({**hf, "norm_before_residual": False}, []).norm_before_residual is False
    with pytest.raises(SpecbenchError, match="fc_norm"):
        parse_head_config({**hf, "fc_norm": True}, [])
    with pytest.raises(SpecbenchError, match="not supported"):
        parse_head_config({**hf, "speculators_model_type": "mlp"}, [])


def test_native_aux_fields_and_their_conventions():
    nested = {**LLAMA, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57]}}
    assert parse_head_config(nested, NATIVE_KEYS).aux.convention == LAYER_OUTPUT
    top = {**LLAMA, "eagle_aux_hidden_state_layer_ids": [2, 30, 58]}
    assert parse_head_config(top, NATIVE_KEYS).aux.convention == HIDDEN_STATES_INDEX
    assert parse_head_config({**nested, **top}, NATIVE_KEYS).aux.ids == (2, 30, 58)  # consistent: both accepted
    with pytest.raises(SpecbenchError, match="disagree"):
        parse_head_config({**nested, "eagle_aux_hidden_state_layer_ids": [1, 29, 57]}, NATIVE_KEYS)
    with pytest.raises(SpecbenchError, match="use_aux_hidden_state"):
        parse_head_config({**LLAMA, "eagle_config": {"use_aux_hidden_state": False}}, NATIVE_KEYS)


def test_aux_resolution():
    layer_output = AuxLayerSpec((1, 29, 57), "eagle_config.eagle_aux_hidden_state_layer_ids", LAYER_OUTPUT)
    # SpecForge's 61-layer DeepSeek-V3 ids equal the reference default (2, 30, 58) once read as layer outputs.
    assert resolve_aux_layers(layer_output, None, "auto", 61).hf_indices == (2, 30, 58)
    assert resolve_aux_layers(layer_output, None, "hidden-states-index", 61).hf_indices == (1, 29, 57)
    absent = AuxLayerSpec(None, "absent", HIDDEN_STATES_INDEX)
    default = resolve_aux_layers(absent, None, "auto", 32)
    assert (default.ids, default.hf_indices, default.convention) == ((2, 16, 29), (2, 16, 29), HIDDEN_STATES_INDEX)
    override = resolve_aux_layers(layer_output, (3, 4, 5), "auto", 61)
    assert override.hf_indices == (4, 5, 6) and override.source.startswith("override")
    with pytest.raises(SpecbenchError, match=r"outside \[0, 4\]"):
        resolve_aux_layers(absent, (1, 2, 4), "layer-output", 4)
    with pytest.raises(SpecbenchError, match="supported"):
        resolve_aux_layers(absent, None, "off-by-one", 4)


def test_native_names_map_to_canonical_and_back():
    assert canonical_name("midlayer.self_attn.q_proj.weight") == "layers.0.self_attn.q_proj.weight"
    assert canonical_name("midlayer.2.mlp.up_proj.weight") == "layers.2.mlp.up_proj.weight"
    assert canonical_name("fc.weight") == "fc.weight"
    native = parse_head_config({**LLAMA, "architectures": ["LlamaForCausalLMEagle3"]}, [])
    assert file_name_for(native, "layers.0.hidden_norm.weight") == "midlayer.hidden_norm.weight"
    two = parse_head_config({**LLAMA, "num_hidden_layers": 2, "architectures": ["LlamaForCausalLMEagle3"]}, [])
    assert file_name_for(two, "layers.1.mlp.up_proj.weight") == "midlayer.1.mlp.up_proj.weight"


def test_engine_config_and_cli_parsing():
    assert parse_layer_ids("2, 16,29") == (2, 16, 29) and parse_layer_ids(None) is None
    with pytest.raises(SpecbenchError, match="comma-separated"):
        parse_layer_ids("2,x")
    with pytest.raises(SpecbenchError, match="eagle_aux_convention"):
        EngineConfig(target="t", eagle_aux_convention="plus-one")
    assert EngineConfig(target="t", eagle_aux_layer_ids=[1, 2]).eagle_aux_layer_ids == (1, 2)


def test_a_head_with_a_sliding_window_is_refused():
    """The head's forward attends over its whole cache: a window its config declares would be silently dropped."""
    windowed = {**LLAMA, "model_type": "mistral", "sliding_window": 8}
    with pytest.raises(SpecbenchError, match="EAGLE heads with sliding-window attention are not supported"):
        parse_head_config(windowed, EAGLE1_KEYS)
    assert parse_head_config({**windowed, "sliding_window": None}, EAGLE1_KEYS).layer.attention_kinds == ()
