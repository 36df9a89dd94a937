"""Benchmark backends (where a sweep's requests run): the registry and `create_backend`.

embedded: the in-process engine. openai: an OpenAI-compatible server (vLLM, SGLang, TensorRT-LLM, `specbench
serve`) driven over HTTP with streaming. Factories import lazily so the embedded path needs no HTTP client.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from specbench.registry import Registry

if TYPE_CHECKING:
    from specbench.backends.base import BenchBackend
    from specbench.runs.sweep_config import SweepConfig
    from specbench.runtime.hooks import EngineFault

BENCH_BACKENDS: Registry[BenchBackend] = Registry("benchmark backend")


@BENCH_BACKENDS.register("embedded")
def _embedded(config: SweepConfig, run_dir: Path, fault: EngineFault | None) -> BenchBackend:
    from specbench.backends.embedded import EmbeddedBackend

    return EmbeddedBackend(config, fault=fault)  # models load in-process: nothing in run_dir


@BENCH_BACKENDS.register("openai")
def _openai(config: SweepConfig, run_dir: Path, fault: EngineFault | None) -> BenchBackend:  # fault: None
    # (validate_config: faults are injected into specbench's own engine only)
    if config.server_cmd is not None:
        from specbench.backends.launching_backend import LaunchingBackend

        return LaunchingBackend(config, run_dir)
    from specbench.backends.openai_backend import OpenAIBackend

    return OpenAIBackend(config)


def create_backend(config: SweepConfig, run_dir: Path, fault: EngineFault | None = None) -> BenchBackend:
    """`run_dir`: where the run's files go (a launched server's log); nothing is written there by creation;
    `fault`: the one `config.inject` names, applied to the embedded engine (run_sweep)."""
    return BENCH_BACKENDS.create(config.backend, config, run_dir, fault)
