"""Which gated-delta-rule kernels a hybrid target's Gated DeltaNet layers run: a value of each model, set when it is
built (EngineConfig.recurrent_kernels, `--recurrent-kernels`, resolved here) or between runs (`set_recurrent_kernels`),
so a torch engine and an fla engine coexist in one process (tests/recurrent/test_hybrid_fla_cuda.py).

- "torch": our references (recurrent/gated_delta_rule.py per token, gated_delta_chunked.py for committed rows).
- "triton": ours (kernels/gated_delta_verify.py) for uniform verify rows (plain decode: one position; a chain verify:
  k + 1), the rows CUDA graphs replay: the conv and the rule in two launches a layer, every position's state kept
  (path hybrid.triton_verify); committed, ragged and tree rows run the torch forms. CUDA, or CPU under the Triton
  interpreter (tests).
- "fla": fla-core's Triton kernels (recurrent/fla_kernels.py): committed rows (prefill, prompt chunks) in one
  varlen `chunk_gated_delta_rule` call over the forward's requests (path hybrid.fla_chunk); verify rows (plain
  decode: one position; a verify: k + 1) by `fused_recurrent_gated_delta_rule` one position at a time over the
  batch, chaining the state, so each position's state is kept for the commit (path hybrid.fla_recurrent).
  CUDA only: fla's import needs a CUDA driver, and its kernels run on CUDA tensors. Tree drafts are refused on it
  (tree_verify.HYBRID_TREE_FLA_REFUSAL): its recurrent kernel chains one state per sequence, a tree's nodes each
  continue their parent's (recurrent/tree_verify.py, the torch choice's).
- "auto" (the default): triton on a CUDA device (unless --fused-kernels off asks for the eager torch layers), else
  torch. Measured on the H100 (BENCHMARKS.md, session 22): the
  triton kernels' plain decode 1.46x faster than torch's with graphs on both; fla keeps no graphs.
The short causal conv is ours in every case.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from specbench.errors import SpecbenchError
from specbench.recurrent.fused_verify import FusedVerify

# The values of EngineConfig.recurrent_kernels (config.py RECURRENT_KERNEL_CHOICES lists them for the option: config
# and recurrent sit in one import layer, so neither imports the other; tests/recurrent/test_recurrent_kernel_choice.py
# holds the two to each other).
TORCH = "torch"
TRITON = "triton"
FLA = "fla"
AUTO = "auto"
CHOICES = (TORCH, TRITON, FLA, AUTO)

CHUNK_PATH = "hybrid.fla_chunk"
RECURRENT_PATH = "hybrid.fla_recurrent"
TRITON_VERIFY_PATH = "hybrid.triton_verify"


class RunsRecurrentKernels:
    """Declares a layer that runs one of the choices (recurrent/gated_delta_net.py GatedDeltaNet); the value is its
    model's resolved choice: TORCH, TRITON or FLA, never "auto". With TRITON, `fused_verify` is the kernels' binding
    (recurrent/fused_verify.py; models/recurrent_kernels.py binds ours)."""

    recurrent_kernels: str = TORCH
    fused_verify: FusedVerify | None = None


@functools.cache
def fla_import_error() -> str | None:
    """None when fla-core's gated-delta-rule ops import here, else why not (one line). Imported once, lazily: the
    production modules never import fla at module level (it needs a CUDA driver to import)."""
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any failure (missing, no driver, wrong triton) means "not usable"
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
    return None


def resolve_recurrent_kernels(name: str, device: torch.device, is_fused_off: bool = False) -> str:
    """TORCH, TRITON or FLA for `name` (one of RECURRENT_KERNEL_CHOICES) on `device`; "triton" or "fla" where it
    cannot run raises one SpecbenchError line. `is_fused_off` (--fused-kernels off: the eager torch layers) makes
    "auto" torch everywhere."""
    if name not in CHOICES:
        raise SpecbenchError(f"unknown recurrent kernels {name!r}; supported: {', '.join(CHOICES)}")
    if name == TORCH:
        return TORCH
    if name == TRITON:  # where it can run: models/recurrent_kernels.py check_triton_recurrent_kernels
        return TRITON
    if name == AUTO:
        return TRITON if device.type == "cuda" and not is_fused_off else TORCH
    if device.type != "cuda":
        raise SpecbenchError(f"--recurrent-kernels fla: fla-core's Triton kernels need a CUDA device (device is "
                             f"{device.type}); use --recurrent-kernels torch or auto")
    reason = fla_import_error()
    if reason is None:
        return FLA
    raise SpecbenchError(f"--recurrent-kernels fla: fla-core is not importable here ({reason}); pip install "
                         "'specbench-cli[fla]' (fla-core), or use --recurrent-kernels torch or auto")


def runs_recurrent_kernels(model: nn.Module) -> bool:
    """Whether `model` has layers the choice applies to (Gated DeltaNet; a Mamba-2 hybrid's mixers always run the
    torch SSD forms)."""
    return any(isinstance(m, RunsRecurrentKernels) for m in model.modules())


def set_recurrent_kernels(model: nn.Module, name: str, fused_verify: FusedVerify | None = None) -> int:
    """Every Gated DeltaNet layer of `model` runs `name` (TORCH, FLA, or TRITON with its `fused_verify` binding)
    from its next forward; returns how many layers were set. Steps that replay a CUDA graph captured before the
    switch keep the kernels of the capture: switch an engine built with --enforce-eager, or build it with the
    choice (EngineConfig.recurrent_kernels)."""
    if name not in (TORCH, TRITON, FLA):
        raise SpecbenchError(f"recurrent kernels must be resolved to {TORCH}, {TRITON} or {FLA} before they are set, "
                             f"got {name!r}")
    if name == TRITON and fused_verify is None:
        raise SpecbenchError("recurrent kernels 'triton' need their binding (models/recurrent_kernels.py)")
    layers = [m for m in model.modules() if isinstance(m, RunsRecurrentKernels)]
    for layer in layers:
        layer.recurrent_kernels = name
        layer.fused_verify = fused_verify if name == TRITON else None
    return len(layers)
