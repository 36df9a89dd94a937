"""gpt-oss checkpoint names of a MoE layer (bf16 as transformers saves GptOssForCausalLM), onto MoeMLP's layout.

    layers.N.mlp.router.weight              [E, hidden]               -> router.weight
    layers.N.mlp.router.bias                [E]                       -> router.bias
    layers.N.mlp.experts.gate_up_proj       [E, hidden, 2 * inter]    gate and up columns alternating
    layers.N.mlp.experts.gate_up_proj_bias  [E, 2 * inter]            alternating likewise
    layers.N.mlp.experts.down_proj          [E, inter, hidden]
    layers.N.mlp.experts.down_proj_bias     [E, hidden]
The expert tensors are converted as they stream in (`gpt_oss_layout`: [E, 2 * inter, hidden] with each expert's gate
rows before its up rows, down [E, hidden, inter]); MXFP4 checkpoints (`*_blocks` / `*_scales`) are refused there.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

from specbench.errors import SpecbenchError
from specbench.models.config_arch import refuse_quantized_weight
from specbench.models.moe import (
    MoeMLP,
    down_from_transposed,
    gate_up_bias_from_interleaved,
    gate_up_from_interleaved,
)

_GATE_UP, _GATE_UP_BIAS = ".mlp.experts.gate_up_proj", ".mlp.experts.gate_up_proj_bias"
_DOWN = ".mlp.experts.down_proj"


def gpt_oss_checkpoint_targets(moe: MoeMLP, layer_prefix: str) -> dict[str, tuple[torch.Tensor, int, int]]:
    """Checkpoint name (`layer_prefix` ours, e.g. "layers.3.") -> (tensor, first row, end row), whole stacks."""
    e, p = moe.config.num_experts, f"{layer_prefix}mlp."
    return {
        f"{p}router.weight": (moe.router.weight, 0, e),
        f"{p}router.bias": (moe.router.bias, 0, e),
        f"{p}experts.gate_up_proj": (moe.gate_up_weight, 0, e),
        f"{p}experts.gate_up_proj_bias": (moe.gate_up_bias, 0, e),
        f"{p}experts.down_proj": (moe.down_weight, 0, e),
        f"{p}experts.down_proj_bias": (moe.down_bias, 0, e),
    }


def gpt_oss_layout(weights: Iterable[tuple[str, torch.Tensor]]) -> Iterator[tuple[str, torch.Tensor]]:
    """The checkpoint's tensors with the expert stacks in MoeMLP's layout (one converted copy per stack)."""
    for name, tensor in weights:
        refuse_quantized_weight(name)
        if name.endswith(_GATE_UP):
            _check_dims(name, tensor, 3)
            yield name, gate_up_from_interleaved(tensor)
        elif name.endswith(_GATE_UP_BIAS):
            _check_dims(name, tensor, 2)
            yield name, gate_up_bias_from_interleaved(tensor)
        elif name.endswith(_DOWN):
            _check_dims(name, tensor, 3)
            yield name, down_from_transposed(tensor)
        else:
            yield name, tensor


def _check_dims(name: str, tensor: torch.Tensor, dims: int) -> None:
    # A wrong width is the loader's shape check; a wrong rank would make the conversion itself fail.
    if tensor.dim() != dims:
        raise SpecbenchError(f"weight {name!r} has shape {tuple(tensor.shape)}; gpt-oss stores it with {dims} dims")
