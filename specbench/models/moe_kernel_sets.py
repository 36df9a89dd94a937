"""Which expert kernels a model's MoE layers run on the fused path: a value of each model, set when it is built
(EngineConfig.moe_kernels, `--moe-kernels`) or between runs (`set_moe_kernels`), so a benchmark can time both sets
on one engine (scripts/bench_moe_before_after.py) and a reference engine and a fast one coexist in one process.

- "auto" (the default): "gemv" for 1 to 64 tokens and the grouped GEMM for batches past 64 (path
  moe.prefill_grouped): each phase's faster set on the H100 (BENCHMARKS.md, session 19: gemv reads the woken
  experts at 80-100% of copy bandwidth in decode and verify, where the grouped few-token kernel is 3-5x slower; the
  grouped GEMM prefills a 1k prompt 7.5x faster than the per-expert loop).
- "gemv": kernels/moe_gemv.py for 1 to 64 tokens; batches past 64 tokens (prefill) take the torch reference's
  per-expert loop.
- "grouped" (issue 47): 2 to 16 tokens (verify rounds) take kernels/moe_few_token.py, the down projection with the
  combine in its epilogue (path moe.few_token_combine); batches past 64 tokens outside a graph capture take the
  grouped GEMM over experts of kernels/moe_prefill.py (path moe.prefill_grouped). One token and 17 to 64 tokens
  run as "gemv".
CUDA graphs keep the set they were captured with: recapture after a change (runtime/cuda_graph.py recapture).
"""

from __future__ import annotations

from torch import nn

from specbench.config import MOE_KERNEL_SETS
from specbench.errors import SpecbenchError

DEFAULT_MOE_KERNELS = MOE_KERNEL_SETS[0]

PREFILL_GROUPED_SETS = ("auto", "grouped")  # the sets whose batches past 64 tokens take the grouped GEMM
FEW_TOKEN_PATH = "moe.few_token_combine"
PREFILL_PATH = "moe.prefill_grouped"
ROUTE_NORM_PATH = "moe.route_norm"  # models/moe_forward.py normed_moe_forward: the norm in the routing kernel


class RunsMoeKernels:
    """Declares a layer that runs one of the sets (models/moe.py MoeMLP); `moe_kernels` is its model's choice."""

    moe_kernels: str = DEFAULT_MOE_KERNELS  # one of MOE_KERNEL_SETS


def set_moe_kernels(model: nn.Module, name: str) -> int:
    """Every MoE layer of `model` runs the `name` set from its next forward; returns how many layers were set."""
    if name not in MOE_KERNEL_SETS:
        raise SpecbenchError(f"unknown MoE kernel set {name!r}; supported: {', '.join(MOE_KERNEL_SETS)}")
    layers = [m for m in model.modules() if isinstance(m, RunsMoeKernels)]
    for layer in layers:
        layer.moe_kernels = name
    return len(layers)
