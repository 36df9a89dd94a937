"""Load a DecoderLM from a local HF directory, a hub id, a .gguf file, or random weights for a shape."""

from __future__ import annotations

import hashlib
import os
import pickle
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from specbench.attention.backend import AttentionBackend, create_backend
from specbench.errors import SpecbenchError
from specbench.json_file import read_json_object
from specbench.models.config import ModelConfig
from specbench.models.default_model import resolve_model_source
from specbench.models.fused_kernels import set_policy
from specbench.models.moe_kernel_sets import DEFAULT_MOE_KERNELS, set_moe_kernels
from specbench.models.recurrent_kernels import TritonDeltaVerify
from specbench.recurrent.kernel_choice import TORCH, TRITON, set_recurrent_kernels
from specbench.models.gguf_loader import convert_gguf, find_gguf
from specbench.models.llama import DecoderLM
from specbench.models.memory import check_model_fits
from specbench.models.presets import MODEL_PRESETS, get_preset
from specbench.models.tokenizer import has_tokenizer_files, load_tokenizer

_DTYPES = {
    "fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
    "fp16": torch.float16, "float16": torch.float16, "half": torch.float16,
}
_HUB_PATTERNS = ["*.json", "*.safetensors", "tokenizer*", "*.model", "*.tiktoken", "*.jinja", "merges.txt"]
_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


@dataclass(frozen=True)
class ModelSource:
    kind: str  # "hf_dir" | "hub" | "gguf" | "dummy"
    path: str  # local directory or .gguf file read; the preset name for dummy presets
    weights_sha256: str | None  # of the weight file (or of "name sha" lines over shards); None when random
    weight_files: tuple[str, ...]  # names of the files the weights came from
    hub_id: str | None = None
    preset: str | None = None


@dataclass(frozen=True)
class LoadedModel:
    model: DecoderLM
    config: ModelConfig
    tokenizer: object | None  # transformers PreTrainedTokenizerBase
    info: ModelSource


def parse_dtype(name: str) -> torch.dtype | None:
    """torch dtype for a user string; "auto" gives None (= the checkpoint's own dtype)."""
    key = name.strip().lower().removeprefix("torch.")
    if key == "auto":
        return None
    if key not in _DTYPES:
        raise SpecbenchError(f"unknown dtype {name!r}; supported: auto, {', '.join(sorted(_DTYPES))}")
    return _DTYPES[key]


def load_model(
    source: str,
    *,
    dtype: torch.dtype | str | None,
    device: torch.device | str,
    attn_backend: AttentionBackend | str,
    load_format: str = "auto",
    allow_pickle: bool = False,
    seed: int = 0,
    max_model_len: int | None = None,
    fused_kernels: str = "auto",
    moe_kernels: str = DEFAULT_MOE_KERNELS,
    recurrent_kernels: str = TORCH,
) -> LoadedModel:
    """`max_model_len`: the context the engine will use; refused before allocating when above the trained one.
    `fused_kernels`: the model's fused-kernel policy (EngineConfig.fused_kernels); `moe_kernels`: its MoE layers'
    expert kernel set (EngineConfig.moe_kernels); `recurrent_kernels`: its Gated DeltaNet layers' kernels, resolved
    (recurrent/kernel_choice.py resolve_recurrent_kernels: torch, triton or fla)."""
    loaded = _load(source, dtype=dtype, device=device, attn_backend=attn_backend, load_format=load_format,
                   allow_pickle=allow_pickle, seed=seed, max_model_len=max_model_len)
    set_policy(loaded.model, fused_kernels)
    set_moe_kernels(loaded.model, moe_kernels)
    set_recurrent_kernels(loaded.model, recurrent_kernels,
                          TritonDeltaVerify() if recurrent_kernels == TRITON else None)
    return loaded


def _load(source: str, *, dtype, device, attn_backend, load_format: str, allow_pickle: bool, seed: int,
          max_model_len: int | None) -> LoadedModel:
    if load_format not in ("auto", "dummy"):
        raise SpecbenchError(f"unknown load format {load_format!r}; supported: auto, dummy")
    if isinstance(dtype, str):
        dtype = parse_dtype(dtype)
    if isinstance(attn_backend, str):
        attn_backend = create_backend(attn_backend)
    device = torch.device(device)
    if load_format == "dummy":
        return _load_dummy(source, dtype, device, attn_backend, seed, max_model_len)
    source = resolve_model_source(source)  # every model (target, draft) is taken here: the one place for the alias

    path, hub_id = Path(source).expanduser(), None
    if not path.exists():
        path, hub_id = _download(source), source
    gguf_path = find_gguf(path)
    gguf_sha256 = None
    if gguf_path is not None:
        gguf_sha256 = _sha256([gguf_path])
        path = convert_gguf(gguf_path, gguf_sha256)
    if path.is_file():
        raise SpecbenchError(f"{path} is a file; expected a model directory (config.json + weights) or a .gguf file")
    config = read_config(path / "config.json")
    check_model_fits(config, dtype or _auto_dtype(config), device, source=str(path), max_model_len=max_model_len)
    files = _weight_files(path, allow_pickle)
    model = DecoderLM(config, attn_backend, dtype or _auto_dtype(config), device)
    model.load_weights(_read_tensors(files))
    tokenizer = load_tokenizer(path) if has_tokenizer_files(path) else None
    if gguf_path is not None:
        info = ModelSource("gguf", str(gguf_path), gguf_sha256, (gguf_path.name,), hub_id)
    else:
        kind = "hub" if hub_id else "hf_dir"
        info = ModelSource(kind, str(path), _sha256(files), tuple(f.name for f in files), hub_id)
    return LoadedModel(model, config, tokenizer, info)


def read_config(config_path: Path) -> ModelConfig:
    if not config_path.is_file():
        raise SpecbenchError(
            f"{config_path.parent} has no config.json; expected a Hugging Face model directory or a .gguf file"
        )
    try:
        return ModelConfig.from_hf(read_json_object(config_path, "model config"))
    except SpecbenchError as err:
        message = str(err)
        raise SpecbenchError(message if str(config_path) in message else f"{config_path}: {message}") from None


def _auto_dtype(config: ModelConfig) -> torch.dtype:
    stored = config.checkpoint_dtype
    return _DTYPES.get(str(stored).removeprefix("torch."), torch.bfloat16) if stored else torch.bfloat16


def _load_dummy(source: str, dtype, device, attn_backend, seed: int, max_model_len: int | None) -> LoadedModel:
    path = Path(source).expanduser()
    if source in MODEL_PRESETS:
        config, directory = get_preset(source), None
    elif path.is_file() and path.suffix == ".json":
        config, directory = read_config(path), path.parent
    elif path.is_dir():
        config, directory = read_config(path / "config.json"), path
    else:
        raise SpecbenchError(
            f"dummy model {source!r} is neither a preset ({', '.join(MODEL_PRESETS.supported())}) "
            "nor an existing config.json or model directory"
        )
    check_model_fits(config, dtype or _auto_dtype(config), device, source=source, max_model_len=max_model_len)
    model = DecoderLM(config, attn_backend, dtype or _auto_dtype(config), device)
    model.init_random_weights(seed)
    tokenizer = load_tokenizer(directory) if directory and has_tokenizer_files(directory) else None
    info = ModelSource("dummy", str(directory or source), None, (), preset=None if directory else source)
    return LoadedModel(model, config, tokenizer, info)


def _download(source: str) -> Path:
    if not _HUB_ID.match(source):
        raise SpecbenchError(f"model path {source!r} does not exist")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import RepositoryNotFoundError

    offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() not in ("", "0", "false", "no")
    try:
        return Path(snapshot_download(source, allow_patterns=_HUB_PATTERNS, local_files_only=offline, etag_timeout=5))
    except RepositoryNotFoundError:
        raise SpecbenchError(f"{source!r} does not exist locally and is not a model on the Hugging Face hub") from None
    except Exception as e:  # connection, timeout, offline-mode cache miss, ...
        why = "HF_HUB_OFFLINE is set and it is not in the local cache" if offline else type(e).__name__
        raise SpecbenchError(
            f"{source!r} does not exist locally and the Hugging Face hub could not be reached ({why})"
        ) from None


def _weight_files(directory: Path, allow_pickle: bool) -> list[Path]:
    for index_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        index = directory / index_name
        if index.is_file():
            shards = _index_shards(index)
            files = [directory / s for s in shards]
            break
    else:
        files = sorted(directory.glob("*.safetensors")) or sorted(directory.glob("pytorch_model*.bin"))
    if not files:
        raise SpecbenchError(
            f"{directory} has a config.json but no weights (expected model.safetensors or "
            "model.safetensors.index.json with its shards)"
        )
    for f in files:
        if not f.is_file():
            raise SpecbenchError(f"weight shard {f.name} listed in the index of {directory} is missing")
    if files[0].suffix == ".bin" and not allow_pickle:
        raise SpecbenchError(
            f"{directory} only has pickle weights ({files[0].name}); loading pickles can run arbitrary code. "
            "Convert them to safetensors or pass --allow-pickle"
        )
    return files


def _index_shards(index: Path) -> list[str]:
    """The shard file names an index's `weight_map` points to (plain names inside the model directory)."""
    weight_map = read_json_object(index, "weight index").get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise SpecbenchError(f"weight index {index}: 'weight_map' must be an object of tensor name -> shard file")
    shards = sorted(set(weight_map.values()))
    bad = next((s for s in shards if not s or Path(s).name != s or s in (".", "..")), None)
    if bad is not None:
        raise SpecbenchError(f"weight index {index}: shard {bad!r} is not a file name in the model directory")
    return shards


def _read_tensors(files: list[Path]) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield (name, tensor) one at a time; safetensors are memory-mapped, so only one tensor is resident."""
    from safetensors import SafetensorError, safe_open

    for f in files:
        try:
            if f.suffix == ".bin":
                yield from torch.load(f, map_location="cpu", weights_only=True, mmap=True).items()
                continue
            with safe_open(str(f), framework="pt", device="cpu") as handle:
                for key in handle.keys():
                    yield key, handle.get_tensor(key)
        except (SafetensorError, OSError, RuntimeError, pickle.UnpicklingError) as e:
            raise SpecbenchError(f"cannot read weights from {f}: {e}") from e


def _sha256(files: list[Path]) -> str:
    digests = [_file_sha256(f) for f in files]
    if len(files) == 1:
        return digests[0]
    lines = "".join(f"{f.name} {d}\n" for f, d in zip(files, digests, strict=True))
    return hashlib.sha256(lines.encode()).hexdigest()


def _file_sha256(path: Path) -> str:
    # Hub cache files link to blobs named by their LFS oid, which is the sha256 of the content.
    target = path.resolve()
    if target.parent.name == "blobs" and re.fullmatch(r"[0-9a-f]{64}", target.name):
        return target.name
    h = hashlib.sha256()
    with open(target, "rb") as f:
        while chunk := f.read(1 << 24):
            h.update(chunk)
    return h.hexdigest()
