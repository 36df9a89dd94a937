"""GGUF checkpoints, read through transformers' GGUF support (dequantized to fp32, then converted)."""

from __future__ import annotations

from pathlib import Path

import torch

from specbench.attention.backend import AttentionBackend
from specbench.errors import SpecbenchError
from specbench.models.config import ModelConfig
from specbench.models.llama import DecoderLM
from specbench.models.tokenizer import load_tokenizer


def find_gguf(path: Path) -> Path | None:
    """The GGUF file `path` names: itself, or the only *.gguf in a directory without config.json."""
    if path.is_file():
        return path if path.suffix == ".gguf" else None
    if (path / "config.json").exists():
        return None
    found = sorted(path.glob("*.gguf"))
    if len(found) > 1:
        names = ", ".join(f.name for f in found)
        raise SpecbenchError(f"{path} holds several GGUF files ({names}); pass the path of one of them")
    return found[0] if found else None


def load_gguf(
    gguf_path: Path, *, dtype: torch.dtype | None, device: torch.device, attn_backend: AttentionBackend
) -> tuple[DecoderLM, ModelConfig, object]:
    """(model, config, tokenizer); dtype None keeps the dequantized fp32."""
    try:
        import accelerate  # noqa: F401  (transformers needs it for GGUF)
        import gguf  # noqa: F401
    except ImportError:
        raise SpecbenchError("loading .gguf files needs two more packages: pip install gguf accelerate") from None
    from transformers import AutoModelForCausalLM

    directory, name = str(gguf_path.parent), gguf_path.name
    try:
        hf_model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32)
    except (ValueError, OSError, KeyError, NotImplementedError) as e:
        raise SpecbenchError(f"cannot load GGUF file {gguf_path}: {e}") from e
    config = ModelConfig.from_hf(hf_model.config.to_dict())
    model = DecoderLM(config, attn_backend, dtype or torch.float32, device)
    state = hf_model.state_dict()
    del hf_model
    model.load_weights(state.items())
    del state
    return model, config, load_tokenizer(directory, gguf_file=name)
