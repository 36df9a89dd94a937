"""Recognise an EAGLE head checkpoint's dialect and normalise its config.json.

Dialects: EAGLE-1 (plain Llama config), EAGLE-3 native (`midlayer.*`, `LlamaForCausalLMEagle3`,
optional nested `eagle_config`) and EAGLE-3 speculators (`speculators_model_type: eagle3`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Iterable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specbench.errors import SpecbenchError
from specbench.json_file import first_error
from specbench.models.config import ModelConfig
from specbench.models.config_shape import MAX_HIDDEN_SIZE, MAX_VOCAB_SIZE

EAGLE1, EAGLE3_NATIVE, EAGLE3_SPECULATORS = "eagle1", "eagle3-native", "eagle3-speculators"
HIDDEN_STATES_INDEX, LAYER_OUTPUT = "hidden-states-index", "layer-output"
_SPECULATORS_DEFAULT_DRAFT_VOCAB = 32000


@dataclass(frozen=True)
class AuxLayerSpec:
    """What the checkpoint says about the target layers an EAGLE-3 head reads."""

    ids: tuple[int, ...] | None  # as written; None = not given (the reference default applies)
    source: str  # config field the ids came from, or "absent"
    convention: str  # how that field's ecosystem reads ids: HIDDEN_STATES_INDEX | LAYER_OUTPUT


@dataclass(frozen=True)
class EagleHeadConfig:
    dialect: str  # EAGLE1 | EAGLE3_NATIVE | EAGLE3_SPECULATORS
    dialect_reason: str  # what identified the dialect, for messages and the manifest
    layer: ModelConfig  # decoder-layer shapes and RoPE, from the head's own config (never the target's)
    num_layers: int
    vocab_size: int  # the target vocabulary the head was built for
    draft_vocab_size: int  # rows of an EAGLE-3 lm_head; == vocab_size for EAGLE-1
    target_hidden_size: int  # width of one target feature
    fc_bias: bool
    norm_before_residual: bool  # EAGLE-3 first layer: residual is hidden_norm(hidden), not hidden
    norm_output: bool  # EAGLE-3: the next step is fed norm(h) rather than h
    aux: AuxLayerSpec | None  # EAGLE-3 only

    @property
    def method(self) -> str:
        return "eagle" if self.dialect == EAGLE1 else "eagle3"

    @property
    def hidden_size(self) -> int:
        return self.layer.hidden_size


class _HeadFieldsShape(BaseModel):
    """The head-level fields read here (the decoder layer's own are ModelConfig's): types and bounds."""

    model_config = ConfigDict(extra="allow")
    speculators_model_type: str | None = None
    architectures: list[str] | None = None
    draft_vocab_size: Annotated[int, Field(ge=1, le=MAX_VOCAB_SIZE)] | None = None
    target_hidden_size: Annotated[int, Field(ge=1, le=MAX_HIDDEN_SIZE)] | None = None
    eagle_config: dict[str, Any] | None = None


def detect_dialect(hf: dict, keys: Iterable[str]) -> tuple[str, str]:
    """(dialect, reason) from the config and the weight names."""
    keys = list(keys)
    spec_type = hf.get("speculators_model_type")
    if spec_type is not None:
        if spec_type != "eagle3":
            raise SpecbenchError(f"speculators_model_type {spec_type!r} is not supported; supported: eagle3")
        return EAGLE3_SPECULATORS, "config speculators_model_type: eagle3"
    if "LlamaForCausalLMEagle3" in (hf.get("architectures") or []):
        return EAGLE3_NATIVE, "config architectures: LlamaForCausalLMEagle3"
    if "d2t" in keys:
        return EAGLE3_NATIVE, "weights contain d2t"
    if any(k.startswith("midlayer.") for k in keys):
        return EAGLE3_NATIVE, "weights contain midlayer.*"
    return EAGLE1, "plain Llama config without EAGLE-3 markers"


def check_head_fields(hf: dict) -> None:
    """The head-level fields' types and bounds (before any weight is read)."""
    try:
        _HeadFieldsShape.model_validate(hf)
    except ValidationError as err:
        raise SpecbenchError(f"EAGLE head config {first_error(err)}") from None


def parse_head_config(hf: dict, keys: Iterable[str]) -> EagleHeadConfig:
    check_head_fields(hf)
    dialect, reason = detect_dialect(hf, keys)
    if dialect == EAGLE3_SPECULATORS:
        return _speculators(hf, reason)
    layer_hf = dict(hf)
    layer_hf["architectures"] = ["LlamaForCausalLM"]
    layer = _layer_config(layer_hf)
    if dialect == EAGLE1:
        return EagleHeadConfig(
            dialect=EAGLE1, dialect_reason=reason, layer=layer, num_layers=layer.num_hidden_layers,
            vocab_size=layer.vocab_size, draft_vocab_size=layer.vocab_size, target_hidden_size=layer.hidden_size,
            fc_bias=bool(hf.get("bias", True)),  # the EAGLE reference defaults to a biased fc
            norm_before_residual=False, norm_output=False, aux=None,
        )
    eagle_config = hf.get("eagle_config") or {}
    _refuse_unsupported(eagle_config, {
        "use_aux_hidden_state": True, "use_input_layernorm_in_first_layer": True, "use_last_layernorm": True,
        "parallel_draft_step": 1,
    }, "eagle_config")
    return EagleHeadConfig(
        dialect=EAGLE3_NATIVE, dialect_reason=reason, layer=layer, num_layers=layer.num_hidden_layers,
        vocab_size=layer.vocab_size, draft_vocab_size=int(hf.get("draft_vocab_size") or layer.vocab_size),
        target_hidden_size=int(hf.get("target_hidden_size") or layer.hidden_size),
        fc_bias=False, norm_before_residual=False, norm_output=False, aux=_native_aux(hf, eagle_config),
    )


def _speculators(hf: dict, reason: str) -> EagleHeadConfig:
    layer_hf = hf.get("transformer_layer_config")
    if not isinstance(layer_hf, dict):
        raise SpecbenchError("speculators config has no transformer_layer_config object")
    _refuse_unsupported(hf, {"norm_before_fc": False, "fc_norm": False}, "config")
    layer = _layer_config(layer_hf)
    ids = hf.get("eagle_aux_hidden_state_layer_ids")
    return EagleHeadConfig(
        dialect=EAGLE3_SPECULATORS, dialect_reason=reason, layer=layer, num_layers=layer.num_hidden_layers,
        vocab_size=layer.vocab_size,
        draft_vocab_size=int(hf.get("draft_vocab_size") or _SPECULATORS_DEFAULT_DRAFT_VOCAB),
        target_hidden_size=int(hf.get("target_hidden_size") or layer.hidden_size),
        fc_bias=False,
        norm_before_residual=bool(hf.get("norm_before_residual", True)),  # speculators' default
        norm_output=bool(hf.get("norm_output", False)),
        aux=AuxLayerSpec(_ids(ids, "eagle_aux_hidden_state_layer_ids"),
                         "eagle_aux_hidden_state_layer_ids" if ids is not None else "absent", HIDDEN_STATES_INDEX),
    )


def _native_aux(hf: dict, eagle_config: dict) -> AuxLayerSpec:
    # SGLang/SpecForge read the nested field as layer-output ids (+1 to reach HF hidden_states);
    # vLLM reads the top-level field as hidden_states indices.
    nested = _ids(eagle_config.get("eagle_aux_hidden_state_layer_ids"), "eagle_config.eagle_aux_hidden_state_layer_ids")
    top = _ids(hf.get("eagle_aux_hidden_state_layer_ids"), "eagle_aux_hidden_state_layer_ids")
    if nested is not None and top is not None and tuple(i + 1 for i in nested) != top:
        raise SpecbenchError(
            f"config gives eagle_aux_hidden_state_layer_ids {list(top)} (hidden_states indices) and "
            f"eagle_config.eagle_aux_hidden_state_layer_ids {list(nested)} (layer outputs), which disagree; "
            "pass --eagle-aux-layer-ids and --eagle-aux-convention explicitly"
        )
    if top is not None:
        return AuxLayerSpec(top, "eagle_aux_hidden_state_layer_ids", HIDDEN_STATES_INDEX)
    if nested is not None:
        return AuxLayerSpec(nested, "eagle_config.eagle_aux_hidden_state_layer_ids", LAYER_OUTPUT)
    return AuxLayerSpec(None, "absent", HIDDEN_STATES_INDEX)


def _ids(value, field: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(i, int) for i in value):
        raise SpecbenchError(f"config field {field} must be a non-empty list of integers, got {value!r}")
    return tuple(value)


def _layer_config(layer_hf: dict) -> ModelConfig:
    config = ModelConfig.from_hf(layer_hf)
    if config.num_hidden_layers < 1:
        raise SpecbenchError("EAGLE head config has num_hidden_layers < 1")
    if config.attention_kinds:  # the head's forward attends causally over its whole cache
        raise SpecbenchError("EAGLE heads with sliding-window attention are not supported")
    return config


def _refuse_unsupported(section: dict, defaults: dict, where: str) -> None:
    for key, default in defaults.items():
        value = section.get(key, default)
        if value is not None and value != default:
            raise SpecbenchError(f"EAGLE head {where} sets {key}={value!r}, which specbench does not support")
