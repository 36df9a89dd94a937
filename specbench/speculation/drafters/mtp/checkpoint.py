"""Find a target checkpoint's multi-token-prediction (MTP) module and read it into canonical names.

Dialects (the key names the checkpoint itself uses):
- "layer-index" (DeepSeek-V3, GLM-4.5; config `num_nextn_predict_layers`): module i is the extra decoder layer
  `model.layers.{num_hidden_layers + i}.*` with `enorm`, `hnorm`, `eh_proj`, `shared_head.norm` beside the decoder
  layer's own weights (`shared_head.head` and `embed_tokens` copy the target's and are not read);
- "mtp-prefix" (Qwen3-Next; config `mtp_num_hidden_layers`): `mtp.pre_fc_norm_embedding`, `mtp.pre_fc_norm_hidden`,
  `mtp.fc`, `mtp.layers.{i}.*`, `mtp.norm`.
Canonical names: `enorm.weight`, `hnorm.weight`, `eh_proj.weight`, `final_norm.weight`, `layers.0.<decoder layer>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from specbench.errors import SpecbenchError

LAYER_INDEX, MTP_PREFIX = "layer-index", "mtp-prefix"
_LAYER_INDEX_RENAMES = {"shared_head.norm.weight": "final_norm.weight"}
_LAYER_INDEX_SKIPPED = ("shared_head.head.weight", "embed_tokens.weight")  # the target's own, shared
_MTP_PREFIX_RENAMES = {"pre_fc_norm_embedding.weight": "enorm.weight", "pre_fc_norm_hidden.weight": "hnorm.weight",
                       "fc.weight": "eh_proj.weight", "norm.weight": "final_norm.weight"}
_KEPT = ("enorm.weight", "hnorm.weight", "eh_proj.weight")


@dataclass(frozen=True)
class MtpCheckpoint:
    path: str  # the target checkpoint directory read
    dialect: str  # LAYER_INDEX | MTP_PREFIX
    tensors: dict[str, torch.Tensor]  # canonical name -> tensor as stored (module `module` only)
    file_names: dict[str, str]  # canonical name -> the name in the file (for messages)
    weights_sha256: str  # of the target's weight files (the MTP ships inside them)
    module: int = 0  # which module's tensors (DeepSeek-V3 / GLM layer-index: model.layers.{L + module}.*)


def canonical_name(dialect: str, name: str, num_target_layers: int, module: int = 0) -> str | None:
    """The canonical name of one of module `module`'s tensors (its decoder layer as `layers.0.*`), or None for a
    tensor that is not that module's. The mtp-prefix dialect has one module."""
    if dialect == LAYER_INDEX:
        prefix = f"model.layers.{num_target_layers + module}."
        if not name.startswith(prefix):
            return None
        rest = name.removeprefix(prefix)
        if rest in _LAYER_INDEX_SKIPPED:
            return None
        return _LAYER_INDEX_RENAMES.get(rest, rest if rest in _KEPT else f"layers.0.{rest}")
    if not name.startswith("mtp."):
        return None
    rest = name.removeprefix("mtp.")
    if rest.startswith("layers.0."):
        return rest
    return _MTP_PREFIX_RENAMES.get(rest, rest)


def detect_dialect(names: list[str], num_target_layers: int, source: str) -> str:
    """The dialect of the checkpoint's MTP weights, or one error when it ships none."""
    if any(n.startswith("mtp.") for n in names):
        return MTP_PREFIX
    if any(n.startswith(f"model.layers.{num_target_layers}.") for n in names):
        return LAYER_INDEX
    raise SpecbenchError(
        f"{source} has no MTP weights (neither model.layers.{num_target_layers}.* as DeepSeek-V3 / GLM-4.5 store "
        "them nor mtp.* as Qwen3-Next does); --method mtp drafts with the target checkpoint's own MTP module"
    )


def read_mtp_checkpoint(directory: Path, num_target_layers: int, allow_pickle: bool, module: int = 0) -> MtpCheckpoint:
    """Module `module`'s tensors, read by name only (safetensors are memory-mapped: the decoder's weights are never
    read)."""
    from specbench.models.loader import _sha256, _weight_files

    files = _weight_files(directory, allow_pickle)
    names = {f: _tensor_names(f) for f in files}
    dialect = detect_dialect([n for ns in names.values() for n in ns], num_target_layers, str(directory))
    tensors: dict[str, torch.Tensor] = {}
    file_names: dict[str, str] = {}
    for f, file_tensor_names in names.items():
        wanted = {n: c for n in file_tensor_names if (c := canonical_name(dialect, n, num_target_layers, module))}
        for name, tensor in _read(f, wanted):
            tensors[wanted[name]], file_names[wanted[name]] = tensor, name
    return MtpCheckpoint(str(directory), dialect, tensors, file_names, _sha256(files), module)


def _tensor_names(f: Path) -> list[str]:
    if f.suffix == ".bin":
        return list(torch.load(f, map_location="cpu", weights_only=True, mmap=True))
    from safetensors import safe_open

    with safe_open(str(f), framework="pt", device="cpu") as handle:
        return list(handle.keys())


def _read(f: Path, wanted: dict[str, str]):
    if not wanted:
        return
    if f.suffix == ".bin":
        state = torch.load(f, map_location="cpu", weights_only=True, mmap=True)
        yield from ((n, state[n]) for n in wanted)
        return
    from safetensors import safe_open

    with safe_open(str(f), framework="pt", device="cpu") as handle:
        for name in wanted:
            yield name, handle.get_tensor(name)
