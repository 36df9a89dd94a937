"""Programmatic dependent launch (PDL, Hopper and later): a kernel may start while the one before it in the stream
is finishing, so its launch and ramp-up hide behind the other's tail. In a decode step's CUDA graph of ~100-400
small kernels that gap is most of what a kernel costs beyond its bytes: on the H100, a graph chain of small
kernels took ~0.6 us less a kernel with it (scripts/bench_pdl.py, session 23; BENCHMARKS.md).

The rule that keeps it exact: a kernel launched with `launch_pdl` runs `wait_for_inputs` before any load or store,
in every program. `gdc_wait` returns once the previous grid has finished and its writes are visible, so each
kernel still sees everything before it (transitively: the previous kernel waited for its own predecessor before
finishing). Then it lets the next kernel launch (`gdc_launch_dependents`). Kernels without PDL (torch's, cuBLAS)
keep the stream's full ordering on their side. `launch_overlap(tensor)` gives a launch both the kernel's
`USE_PDL` constexpr and the launch option from one decision, so a kernel never launches early without waiting.

On by default where it runs (CUDA, compute capability 9.0+, not the CPU interpreter); `SPECBENCH_PDL=off` in the
environment launches every kernel exactly as before (USE_PDL False prunes the wait), for an A/B or a driver that
misbehaves. Measured on the H100 (session 24, BENCHMARKS.md), off -> on in one call: Qwen3-30B-A3B cut to 12
layers, plain c=1 target forward 1.06 -> 0.99 ms (60.0% -> 64.3% of floor); gpt-oss-20b 12 layers 1.83 -> 1.75 ms
(73.8% -> 77.3%); the Qwen3-Next hybrid 12 layers, plain c=1 step 1.66 -> 1.60 ms; tests/kernels/test_kernel_pdl.py's
GPU test (a MoE and a hybrid target, the same tokens on and off) passed there. Graphs keep the mode they were
captured with.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from specbench.env_modes import env_mode

ENV = "SPECBENCH_PDL"
MODES = ("off", "on")


def mode() -> str:
    return env_mode(ENV, MODES, "on")


@functools.lru_cache(maxsize=None)
def _supported(device_index: int) -> bool:
    return torch.cuda.get_device_capability(device_index)[0] >= 9


@functools.lru_cache(maxsize=None)
def _is_on() -> bool:
    return mode() == "on"


def uses_pdl(tensor: torch.Tensor) -> bool:
    """Whether kernels on `tensor`'s device launch with PDL (device type, capability and the environment only)."""
    if tensor.device.type != "cuda" or not _is_on():
        return False
    index = tensor.device.index if tensor.device.index is not None else torch.cuda.current_device()
    return _supported(index)


def launch_overlap(tensor: torch.Tensor) -> dict:
    """Keyword arguments for a launch of a kernel that takes `USE_PDL` and runs `wait_for_inputs(USE_PDL)` first."""
    is_on = uses_pdl(tensor)
    return {"USE_PDL": is_on, "launch_pdl": is_on}


@triton.jit
def wait_for_inputs(USE_PDL: tl.constexpr):
    """First thing in every program of a kernel that may launch early (no memory access before it)."""
    if USE_PDL:
        gdc_wait()
        gdc_launch_dependents()
