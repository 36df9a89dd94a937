"""Where Triton kernels can run (CUDA, or CPU under TRITON_INTERPRET=1) and small launch helpers."""

from __future__ import annotations

import functools

import torch
import triton
from triton.runtime.interpreter import InterpretedFunction

from specbench.errors import SpecbenchError

# Kernels take their launch-time view of TRITON_INTERPRET when they are decorated (module import);
# on CPU it must be set before the first `specbench.kernels.*` import.
CPU_HINT = "set TRITON_INTERPRET=1 before importing specbench.kernels to run them on CPU (slow, for tests)"


def is_interpreted(kernel) -> bool:
    return isinstance(kernel, InterpretedFunction)


def check_runnable(kernel, tensor: torch.Tensor) -> None:
    if tensor.device.type == "cuda" or (tensor.device.type == "cpu" and is_interpreted(kernel)):
        return
    raise SpecbenchError(f"Triton kernels need a CUDA device, got a {tensor.device.type} tensor; {CPU_HINT}")


def next_pow2(n: int) -> int:
    return triton.next_power_of_2(max(int(n), 1))


@functools.lru_cache(maxsize=None)
def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors to fill; the interpreter pretends to have 4 so split paths stay exercised."""
    if device.type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count


def slot_strides(cache: torch.Tensor) -> tuple[int, int]:  # cache: [num_blocks, block_size, num_kv_heads, head_dim]
    """(slot, head) strides of a paged cache; slot = block * block_size + offset needs whole blocks contiguous."""
    if cache.stride(0) != cache.shape[1] * cache.stride(1) or cache.stride(3) != 1:
        raise ValueError(f"paged cache strides {cache.stride()} do not allow flat slot indexing")
    return cache.stride(1), cache.stride(2)
