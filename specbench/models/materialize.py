"""Real storage for a module built on the meta device: `module.to(dtype).to_empty(device=device)`, without torch's
meta-tensor `empty_like`. That one runs a Python reference implementation which imports torch.fx's symbolic shapes and
sympy, ~0.6 s the first time in a process (each CLI run, each test worker, each selftest worker), for memory that
the loader fills anyway."""

from __future__ import annotations

import torch
from torch import nn


def materialize_(module: nn.Module, dtype: torch.dtype, device: torch.device | str) -> nn.Module:
    """Floating-point parameters and buffers cast to `dtype` (as `.to(dtype)` does), then every one of them given
    uninitialized memory of its shape and dtype on `device` (as `to_empty` does; modules' own `_apply` still runs)."""
    module.to(dtype)
    return module._apply(lambda t: torch.empty(t.shape, dtype=t.dtype, device=device))
