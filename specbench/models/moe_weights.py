"""Checkpoint names of a MoE layer's weights, in the two layouts Hugging Face checkpoints store them.

Per expert (what Qwen3-MoE checkpoints on the hub hold, and what transformers 5's `save_pretrained` writes back):
    {mlp}.gate.weight                         [E, hidden]   -> router.weight
    {mlp}.experts.{e}.gate_proj.weight        [inter, hidden] -> gate_up_weight[e, :inter]
    {mlp}.experts.{e}.up_proj.weight          [inter, hidden] -> gate_up_weight[e, inter:]
    {mlp}.experts.{e}.down_proj.weight        [hidden, inter] -> down_weight[e]
Fused (transformers 5's in-memory parameters, as a raw `state_dict` dump stores them):
    {mlp}.experts.gate_up_proj                [E, 2 * inter, hidden], each expert's gate rows before its up rows
    {mlp}.experts.down_proj                   [E, hidden, inter]
The fused tensors are split into the per-expert names as they stream in (`per_expert_names`), so one target table
serves both layouts and the loader's exactly-once check covers every expert either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

from specbench.errors import SpecbenchError
from specbench.models.moe import MoeMLP

_FUSED_GATE_UP = ".experts.gate_up_proj"
_FUSED_DOWN = ".experts.down_proj"


def moe_checkpoint_targets(moe: MoeMLP, prefix: str) -> dict[str, tuple[torch.Tensor, int, int]]:
    """Per-expert checkpoint name (our path `prefix`, e.g. "layers.3.mlp.") -> (tensor, first row, end row)."""
    c = moe.config
    if c.has_router_bias or c.has_expert_bias or c.has_shared_expert or c.has_score_correction_bias:
        raise SpecbenchError("checkpoint names are only known for MoE layers without biases or shared experts")
    inter = c.moe_intermediate_size
    targets = {f"{prefix}gate.weight": (moe.router.weight, 0, c.num_experts)}
    for e in range(c.num_experts):
        # Views into the stacked parameters: the loader's row slice and copy write through them.
        gate_up, down = moe.gate_up_weight[e], moe.down_weight[e]
        targets[f"{prefix}experts.{e}.gate_proj.weight"] = (gate_up, 0, inter)
        targets[f"{prefix}experts.{e}.up_proj.weight"] = (gate_up, inter, 2 * inter)
        targets[f"{prefix}experts.{e}.down_proj.weight"] = (down, 0, down.shape[0])
    return targets


def per_expert_names(weights: Iterable[tuple[str, torch.Tensor]]) -> Iterator[tuple[str, torch.Tensor]]:
    """The checkpoint's tensors with fused expert stacks split into per-expert views (no copies)."""
    for name, tensor in weights:
        if name.endswith(_FUSED_GATE_UP):
            mlp = name[: -len(_FUSED_GATE_UP)]
            _check_stacked(name, tensor)
            if tensor.shape[1] % 2:
                raise SpecbenchError(f"weight {name!r} has shape {tuple(tensor.shape)}: an odd [gate; up] width")
            inter = tensor.shape[1] // 2
            for e in range(tensor.shape[0]):
                yield f"{mlp}.experts.{e}.gate_proj.weight", tensor[e, :inter]
                yield f"{mlp}.experts.{e}.up_proj.weight", tensor[e, inter:]
        elif name.endswith(_FUSED_DOWN):
            mlp = name[: -len(_FUSED_DOWN)]
            _check_stacked(name, tensor)
            for e in range(tensor.shape[0]):
                yield f"{mlp}.experts.{e}.down_proj.weight", tensor[e]
        else:
            yield name, tensor


def _check_stacked(name: str, tensor: torch.Tensor) -> None:
    if tensor.dim() != 3:
        raise SpecbenchError(f"weight {name!r} has shape {tuple(tensor.shape)}; fused experts are [experts, out, in]")
