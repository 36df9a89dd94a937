"""Shared test setup: debug invariants on, Triton's interpreter on CPU, tiny checkpoint fixtures (helpers are in
tests/support/, imported as `tests.support.<module>`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

os.environ["SPECBENCH_DEBUG_INVARIANTS"] = "1"
# Triton reads TRITON_INTERPRET once, when first imported: set here, before any test module imports it, the kernel
# tests run interpreted on CPU (those that find triton imported without it rerun in a fresh process).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from tests.support.interpreter_patch_cache import install as _install_interpreter_patch_cache

    _install_interpreter_patch_cache()  # a third of an interpreted engine test's time (see the module)
    from tests.support.interpreter_np_dtype import install as _install_interpreter_np_dtype

    _install_interpreter_np_dtype()  # ~8% of an interpreted engine test's time (see the module)
    from tests.support.interpreter_overflow_check import install as _install_interpreter_overflow_check

    _install_interpreter_overflow_check()  # an int op's overflow check whose verdict is dropped (see the module)
    from tests.support.interpreter_block_types import install as _install_interpreter_block_types

    _install_interpreter_block_types()  # block types and tensor shapes built once per type (see the module)
# Test models are tiny: per-op OpenMP fork/join across the 2 CI cores costs more than it saves
# (measured 5-10x slower decode steps with 2 threads than with 1).
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A 2-layer Llama HF checkpoint (fp32 safetensors, untied) with the trained tiny BPE tokenizer."""
    from tests.support.tiny_models import build_tiny_model

    out = tmp_path_factory.mktemp("tiny_llama")
    build_tiny_model(out, "llama", seed=0)
    return out


@pytest.fixture(scope="session")
def tiny_draft_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """A draft for `tiny_model_dir` (same tokenizer), from its weights perturbed by 10%."""
    from tests.support.tiny_models import derive_draft

    return derive_draft(tiny_model_dir, tmp_path_factory.mktemp("tiny_llama_draft"), noise=0.1, seed=1)
