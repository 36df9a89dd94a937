"""Llama-family decoder models, their configs, dummy presets, checkpoint loading and tokenizers."""

from specbench.models.config import ModelConfig, RopeScaling
from specbench.models.llama import DecoderLayer, DecoderLM, ModelOutput, SelfAttention
from specbench.models.loader import LoadedModel, ModelSource, load_model, parse_dtype
from specbench.models.presets import get_preset, preset_names
from specbench.models.tokenizer import apply_chat_template, eos_token_ids, load_tokenizer

__all__ = [
    "DecoderLM", "DecoderLayer", "LoadedModel", "ModelConfig", "ModelOutput", "ModelSource", "RopeScaling",
    "SelfAttention", "apply_chat_template", "eos_token_ids", "get_preset", "load_model", "load_tokenizer",
    "parse_dtype", "preset_names",
]
