"""A check's engine unless told otherwise (a light import: the CLI's option defaults derive from it)."""

from __future__ import annotations

from specbench.config import EngineConfig

# Tiny prompts on the CPU: exact fp32 comparisons, small KV blocks and pool, a few requests at once.
CHECK_ENGINE_DEFAULTS = {"dtype": "fp32", "device": "cpu", "block_size": 4, "kv_cache_gb": 0.05, "max_concurrency": 4}


def check_engine(**values) -> EngineConfig:
    """An EngineConfig with the check defaults under `values`; `--device auto` resolved here, once, to the device
    every engine and reference of the check then shares (a check compares tensors across engines)."""
    config = EngineConfig(**{**CHECK_ENGINE_DEFAULTS, **values})
    if config.device != "auto":
        return config
    from dataclasses import replace

    from specbench.engine.builder import resolve_device

    return replace(config, device=str(resolve_device("auto")))
