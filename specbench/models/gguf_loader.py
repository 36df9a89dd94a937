"""GGUF checkpoints, read through transformers' GGUF support (dequantized to fp32, then converted)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

from specbench.errors import SpecbenchError
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


def gguf_cache_dir(gguf_sha256: str) -> Path:
    """Where a GGUF file's conversion to an HF directory is kept (`SPECBENCH_CACHE_DIR`, default ~/.cache)."""
    root = Path(os.environ.get("SPECBENCH_CACHE_DIR", Path.home() / ".cache" / "specbench"))
    return root / "gguf" / gguf_sha256[:32]


def convert_gguf(gguf_path: Path, gguf_sha256: str) -> Path:
    """An HF directory (config, safetensors, tokenizer) equivalent to the GGUF file, converted once.

    transformers' GGUF path dequantizes and rebuilds the tokenizer from GGUF metadata (about a
    minute for SmolLM2); the cached directory then loads like any HF checkpoint in seconds.
    """
    out = gguf_cache_dir(gguf_sha256)
    if (out / "config.json").is_file():
        return out
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
    tokenizer = load_tokenizer(directory, gguf_file=name)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=out.parent))
    except OSError as e:
        raise SpecbenchError(f"cannot write the GGUF conversion cache under {out.parent}: {e.strerror}") from None
    # save_pretrained refuses GGUF-sourced models; the dequantized fp32 weights are plain tensors.
    config = hf_model.config.to_dict()
    config.pop("quantization_config", None)
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    state = {k: v.detach().contiguous() for k, v in hf_model.state_dict().items()}
    if config.get("tie_word_embeddings"):
        state.pop("lm_head.weight", None)  # the embedding itself; safetensors refuses shared storage
    save_file(state, tmp / "model.safetensors", metadata={"format": "pt", "source": gguf_path.name})
    tokenizer.save_pretrained(tmp)
    try:
        os.replace(tmp, out)  # atomic: a half-written conversion is never visible under its final name
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # a concurrent conversion won the race
    return out
