"""Host lists to device tensors without stalling the host: pinned staging plus a non-blocking copy.

A copy from pageable memory makes the host wait until the stream drains, which serialises the Python step
loop with the GPU; every host-built tensor in the step loop goes through here instead.
"""

from __future__ import annotations

from array import array

import torch

# array typecodes of the dtypes the step loop builds from Python lists (array -> tensor is ~3x faster than
# torch.tensor(list), which dominates metadata building at batch 64)
_TYPECODES = {torch.int64: "q", torch.int32: "i", torch.float32: "f", torch.bool: "b"}


def host_tensor(values, dtype: torch.dtype) -> torch.Tensor:
    """A CPU tensor of `values` (a flat sequence of Python numbers)."""
    code = _TYPECODES.get(dtype)
    if code is None or not len(values):
        return torch.tensor(values, dtype=dtype)
    return torch.frombuffer(array(code, values), dtype=dtype)


def to_device(values, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    t = host_tensor(values, dtype)
    if torch.device(device).type == "cuda":
        # The caching host allocator keeps the pinned block alive until the copy has run.
        return t.pin_memory().to(device, non_blocking=True)
    return t


def tensor_to_device(t: torch.Tensor, device: torch.device | str, dtype: torch.dtype | None = None) -> torch.Tensor:
    """`t.to(device, dtype)`, staged through pinned memory when a host tensor goes to a GPU."""
    device = torch.device(device)
    if t.device.type == "cpu" and device.type == "cuda":
        t = t.pin_memory() if not t.is_pinned() else t
        return t.to(device=device, dtype=dtype or t.dtype, non_blocking=True)
    return t.to(device=device, dtype=dtype or t.dtype)
