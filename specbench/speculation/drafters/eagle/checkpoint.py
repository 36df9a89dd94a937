"""Read an EAGLE head directory (config.json + safetensors or .bin) into canonical weight names.

Canonical names are the speculators layout: `layers.{i}.*`, `fc.*`, `norm.weight`, `lm_head.weight`,
`embed_tokens.weight`, `d2t`, `t2d`. Native EAGLE-3 `midlayer.*` (one layer) and `midlayer.{i}.*` map onto them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import torch

from specbench.errors import SpecbenchError
from specbench.json_file import read_json_object
from specbench.speculation.drafters.eagle.config import (
    EAGLE3_NATIVE, EagleHeadConfig, check_head_fields, parse_head_config,
)

_MIDLAYER = re.compile(r"^midlayer\.(?:(\d+)\.)?")
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)  # derived from the config, never a trained weight


@dataclass(frozen=True)
class EagleCheckpoint:
    path: str  # directory read
    config: EagleHeadConfig
    tensors: dict[str, torch.Tensor]  # canonical name -> tensor as stored
    file_names: dict[str, str]  # canonical name -> the name in the file (for messages)
    weight_files: tuple[str, ...]
    weights_sha256: str

    def file_name(self, canonical: str) -> str:
        """The checkpoint's own spelling of a canonical name (also for names it lacks)."""
        if canonical in self.file_names:
            return self.file_names[canonical]
        return file_name_for(self.config, canonical)


def file_name_for(config: EagleHeadConfig, canonical: str) -> str:
    return native_file_name(canonical, config.num_layers) if config.dialect == EAGLE3_NATIVE else canonical


def native_file_name(canonical: str, num_layers: int) -> str:
    """A native EAGLE-3 checkpoint's name for a canonical one (`layers.*` -> `midlayer.*` / `midlayer.{i}.*`)."""
    if not canonical.startswith("layers."):
        return canonical
    _, index, rest = canonical.split(".", 2)
    return f"midlayer.{rest}" if num_layers == 1 else f"midlayer.{index}.{rest}"


def canonical_name(name: str) -> str:
    match = _MIDLAYER.match(name)
    if match is None:
        return name
    return f"layers.{match.group(1) or 0}.{name[match.end():]}"


def read_checkpoint(source: str, *, allow_pickle: bool) -> EagleCheckpoint:
    # The target loader's file discovery, pickle policy and hashing apply to heads unchanged.
    from specbench.models.loader import _download, _read_tensors, _sha256, _weight_files

    path = Path(source).expanduser()
    if not path.exists():
        path = _download(source)
    if not path.is_dir():
        raise SpecbenchError(f"EAGLE head {source!r} must be a directory with config.json and weights")
    config_path = path / "config.json"
    if not config_path.is_file():
        raise SpecbenchError(f"EAGLE head directory {path} has no config.json")
    hf = read_json_object(config_path, "EAGLE head config")
    try:
        check_head_fields(hf)
    except SpecbenchError as err:
        raise SpecbenchError(f"{config_path}: {err}") from None
    files = _weight_files(path, allow_pickle)
    tensors: dict[str, torch.Tensor] = {}
    file_names: dict[str, str] = {}
    for name, tensor in _read_tensors(files):
        if name.endswith(_IGNORED_SUFFIXES):
            continue
        canonical = canonical_name(name)
        if canonical in tensors:
            raise SpecbenchError(
                f"EAGLE head {path} stores {canonical!r} twice (as {file_names[canonical]!r} and {name!r})"
            )
        tensors[canonical] = tensor
        file_names[canonical] = name
    config = parse_head_config(hf, file_names.values())
    return EagleCheckpoint(str(path), config, tensors, file_names, tuple(f.name for f in files), _sha256(files))
