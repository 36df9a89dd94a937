"""Refuse a model or KV pool that cannot fit the device before allocating it (a clear error, not an OOM traceback)."""

from __future__ import annotations

import os

import torch

from specbench.errors import SpecbenchError
from specbench.models.config import ModelConfig


def device_memory_bytes(device: torch.device) -> int | None:
    """Total memory of `device` (a CUDA card, or the host's RAM for cpu); None where it cannot be told."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    if device.type == "cpu":
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):  # not a POSIX host
            return None
    return None


def _gib(num_bytes: float) -> str:
    return f"{num_bytes / 2**30:,.1f} GiB"


def check_model_fits(config: ModelConfig, dtype: torch.dtype, device: torch.device, *, source: str,
                     max_model_len: int | None = None) -> None:
    """The weights' bytes (parameter count x dtype size) must not exceed the device's total memory, and a
    requested context must not exceed the trained one (positions beyond it were never trained: silent garbage)."""
    if max_model_len is not None and max_model_len > config.max_position_embeddings:
        raise SpecbenchError(
            f"max_model_len (--max-model-len) {max_model_len} exceeds {source}'s trained context "
            f"(max_position_embeddings {config.max_position_embeddings})"
        )
    need = config.num_params() * dtype.itemsize
    total = device_memory_bytes(device)
    if total is not None and need > total:
        raise SpecbenchError(
            f"model {source}: its config implies {config.num_params():,} parameters ({_gib(need)} in "
            f"{str(dtype).removeprefix('torch.')}), more than the {device.type} memory ({_gib(total)})"
        )


def check_kv_budget(kv_cache_gb: float | None, device: torch.device) -> None:
    """An explicit KV budget larger than the whole device can never be allocated."""
    total = device_memory_bytes(device)
    if kv_cache_gb is not None and total is not None and kv_cache_gb * 2**30 > total:
        raise SpecbenchError(
            f"kv_cache_gb (--kv-cache-gb) {kv_cache_gb:g} is more than the {device.type} memory ({_gib(total)})"
        )
