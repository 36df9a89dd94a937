"""Shared test setup: debug invariants on, `tests/` importable (tiny_models), tiny checkpoint fixtures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

os.environ["SPECBENCH_DEBUG_INVARIANTS"] = "1"
# Test models are tiny: per-op OpenMP fork/join across the 2 CI cores costs more than it saves
# (measured 5-10x slower decode steps with 2 threads than with 1).
torch.set_num_threads(1)
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A 2-layer Llama HF checkpoint (fp32 safetensors, untied) with the trained tiny BPE tokenizer."""
    from tiny_models import build_tiny_model

    out = tmp_path_factory.mktemp("tiny_llama")
    build_tiny_model(out, "llama", seed=0)
    return out


@pytest.fixture(scope="session")
def tiny_draft_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """A draft for `tiny_model_dir` (same tokenizer), from its weights perturbed by 10%."""
    from tiny_models import derive_draft

    return derive_draft(tiny_model_dir, tmp_path_factory.mktemp("tiny_llama_draft"), noise=0.1, seed=1)
