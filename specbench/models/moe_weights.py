"""Checkpoint names of a MoE layer's weights, in the two layouts Hugging Face checkpoints store them.

Per expert (what the hub's checkpoints hold, and what transformers 5's `save_pretrained` writes back), with the
architecture's names (`EXPERT_NAMES`: Qwen3-MoE `mlp` / gate_proj, up_proj, down_proj; Mixtral `block_sparse_moe` /
w1, w3, w2):
    layers.N.{module}.gate.weight                [E, hidden]     -> router.weight
    layers.N.{module}.experts.{e}.{gate}.weight  [inter, hidden] -> gate_up_weight[e, :inter]
    layers.N.{module}.experts.{e}.{up}.weight    [inter, hidden] -> gate_up_weight[e, inter:]
    layers.N.{module}.experts.{e}.{down}.weight  [hidden, inter] -> down_weight[e]
Fused (transformers 5's in-memory parameters, as a raw `state_dict` dump stores them; `mlp` for every architecture):
    layers.N.mlp.experts.gate_up_proj            [E, 2 * inter, hidden], each expert's gate rows before its up rows
    layers.N.mlp.experts.down_proj               [E, hidden, inter]
    layers.N.mlp.gate.weight                     [E, hidden], the router
The fused tensors are split into the per-expert names as they stream in (`per_expert_names`), so one target table
serves both layouts and the loader's exactly-once check covers every expert either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch

from specbench.errors import SpecbenchError
from specbench.models.moe import MoeMLP

_FUSED_GATE_UP = ".mlp.experts.gate_up_proj"
_FUSED_DOWN = ".mlp.experts.down_proj"
_FUSED_ROUTER = ".mlp.gate.weight"


@dataclass(frozen=True)
class ExpertNames:
    module: str  # the MoE block's name in the layer
    gate: str
    up: str
    down: str
    shared: str | None = None  # the shared expert's name in the block (gate_proj / up_proj / down_proj inside)
    shared_gate: str | None = None  # the shared expert's sigmoid gate, Linear(hidden, 1) (Qwen3-Next)


# architecture -> its checkpoints' names
EXPERT_NAMES = {
    "qwen3_moe": ExpertNames("mlp", "gate_proj", "up_proj", "down_proj"),
    "mixtral": ExpertNames("block_sparse_moe", "w1", "w3", "w2"),
    "glm4_moe": ExpertNames("mlp", "gate_proj", "up_proj", "down_proj", shared="shared_experts"),
    "qwen3_next": ExpertNames("mlp", "gate_proj", "up_proj", "down_proj", shared="shared_expert",
                              shared_gate="shared_expert_gate"),
    # Granite-4: its stacked input_linear / output_linear and shared_mlp arrive renamed (models/granite_hybrid.py)
    "granitemoehybrid": ExpertNames("block_sparse_moe", "gate_proj", "up_proj", "down_proj", shared="shared_mlp"),
}


def moe_checkpoint_targets(
    moe: MoeMLP, layer_prefix: str, names: ExpertNames
) -> dict[str, tuple[torch.Tensor, int, int]]:
    """Per-expert checkpoint name (`layer_prefix` is ours, e.g. "layers.3.") -> (tensor, first row, end row)."""
    prefix = f"{layer_prefix}{names.module}."
    c = moe.config
    if c.has_router_bias or c.has_expert_bias or (c.is_shared_expert_gated and not names.shared_gate) or (
            c.has_shared_expert and not names.shared):
        raise SpecbenchError("checkpoint names are only known for Qwen3-MoE, Mixtral and GLM-4.5 MoE layers")
    inter = c.moe_intermediate_size
    targets = {f"{prefix}gate.weight": (moe.router.weight, 0, c.num_experts)}
    if c.has_score_correction_bias:
        targets[f"{prefix}gate.e_score_correction_bias"] = (moe.score_correction_bias, 0, c.num_experts)
    if c.has_shared_expert:
        shared, width = moe.shared_expert, c.shared_intermediate_size
        targets[f"{prefix}{names.shared}.gate_proj.weight"] = (shared.gate_up_proj.weight, 0, width)
        targets[f"{prefix}{names.shared}.up_proj.weight"] = (shared.gate_up_proj.weight, width, 2 * width)
        targets[f"{prefix}{names.shared}.down_proj.weight"] = (shared.down_proj.weight, 0, c.hidden_size)
    if c.is_shared_expert_gated:
        targets[f"{prefix}{names.shared_gate}.weight"] = (moe.shared_expert_gate.weight, 0, 1)
    for e in range(c.num_experts):
        # Views into the stacked parameters: the loader's row slice and copy write through them.
        gate_up, down = moe.gate_up_weight[e], moe.down_weight[e]
        targets[f"{prefix}experts.{e}.{names.gate}.weight"] = (gate_up, 0, inter)
        targets[f"{prefix}experts.{e}.{names.up}.weight"] = (gate_up, inter, 2 * inter)
        targets[f"{prefix}experts.{e}.{names.down}.weight"] = (down, 0, down.shape[0])
    return targets


def per_expert_names(
    weights: Iterable[tuple[str, torch.Tensor]], names: ExpertNames | None
) -> Iterator[tuple[str, torch.Tensor]]:
    """The checkpoint's tensors with fused expert stacks split into per-expert views (no copies); names None: a
    dense model, nothing to split."""
    for name, tensor in weights:
        if names is None:
            yield name, tensor
        elif name.endswith(_FUSED_GATE_UP):
            layer = name[: -len(_FUSED_GATE_UP)]
            _check_stacked(name, tensor)
            if tensor.shape[1] % 2:
                raise SpecbenchError(f"weight {name!r} has shape {tuple(tensor.shape)}: an odd [gate; up] width")
            inter = tensor.shape[1] // 2
            for e in range(tensor.shape[0]):
                yield f"{layer}.{names.module}.experts.{e}.{names.gate}.weight", tensor[e, :inter]
                yield f"{layer}.{names.module}.experts.{e}.{names.up}.weight", tensor[e, inter:]
        elif name.endswith(_FUSED_DOWN):
            layer = name[: -len(_FUSED_DOWN)]
            _check_stacked(name, tensor)
            for e in range(tensor.shape[0]):
                yield f"{layer}.{names.module}.experts.{e}.{names.down}.weight", tensor[e]
        elif name.endswith(_FUSED_ROUTER):
            yield f"{name[: -len(_FUSED_ROUTER)]}.{names.module}.gate.weight", tensor
        else:
            yield name, tensor


def _check_stacked(name: str, tensor: torch.Tensor) -> None:
    if tensor.dim() != 3:
        raise SpecbenchError(f"weight {name!r} has shape {tuple(tensor.shape)}; fused experts are [experts, out, in]")
