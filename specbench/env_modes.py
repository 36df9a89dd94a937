"""Environment switches with a fixed set of values (SPECBENCH_PDL, SPECBENCH_PENDING_FUSIONS): one reader, and the one
error a user's setting can cause."""

from __future__ import annotations

import os

from specbench.errors import SpecbenchError


def env_mode(name: str, modes: tuple[str, ...], default: str) -> str:
    """The variable's value, lower-cased (unset or empty: `default`); any other value than `modes` is one error."""
    value = os.environ.get(name, default).strip().lower() or default
    if value not in modes:
        raise SpecbenchError(f"{name}={value!r}; supported: {', '.join(modes)}")
    return value
