"""`--recurrent-kernels torch | fla | auto`: parsed and refused like the other kernel options, resolved per device
(fla needs CUDA and an importable fla-core: one error line otherwise; auto falls back to torch), set on the model's
Gated DeltaNet layers, recorded in the parts the manifest reads; the fla paths are declared opt-in, hybrid only; and
production code imports without fla."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from tests.support.cli_run import assert_one_clean_error, run_main
from tests.support.tiny_hybrid import build_tiny_hybrid
from tests.support.tiny_models import build_tiny_model

from specbench import LLM
from specbench.config import EngineConfig
from specbench.errors import SpecbenchError
from specbench.execution_paths import HYBRID, PATHS
from specbench.recurrent import kernel_choice
from specbench.recurrent.kernel_choice import (CHUNK_PATH, FLA, RECURRENT_PATH, TORCH, TRITON, resolve_recurrent_kernels,
                                               set_recurrent_kernels)

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def test_the_option_defaults_to_auto_and_refuses_unknown_values():
    from specbench.config import RECURRENT_KERNEL_CHOICES

    assert RECURRENT_KERNEL_CHOICES == kernel_choice.CHOICES  # the option's values are the resolver's
    assert EngineConfig().recurrent_kernels == "auto"
    assert EngineConfig(recurrent_kernels="torch").recurrent_kernels == "torch"
    with pytest.raises(SpecbenchError, match=r"unknown recurrent_kernels \(--recurrent-kernels\) 'cutlass'"):
        EngineConfig(recurrent_kernels="cutlass")
    with pytest.raises(SpecbenchError, match="unknown recurrent kernels 'cutlass'"):
        resolve_recurrent_kernels("cutlass", CPU)


def test_on_cpu_auto_is_torch_and_fla_is_one_error_line():
    assert resolve_recurrent_kernels("torch", CPU) == TORCH
    assert resolve_recurrent_kernels("auto", CPU) == TORCH
    with pytest.raises(SpecbenchError, match="need a CUDA device") as info:
        resolve_recurrent_kernels("fla", CPU)
    assert "\n" not in str(info.value)


def test_on_cuda_auto_is_triton_and_fla_without_fla_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "fla", None)  # `import fla...` raises ImportError
    kernel_choice.fla_import_error.cache_clear()
    try:
        assert kernel_choice.fla_import_error() is not None
        assert resolve_recurrent_kernels("auto", CUDA) == TRITON
        assert resolve_recurrent_kernels("auto", CUDA, is_fused_off=True) == TORCH  # the eager torch layers asked
        with pytest.raises(SpecbenchError, match=r"specbench-cli\[fla\]") as info:
            resolve_recurrent_kernels("fla", CUDA)
        assert "\n" not in str(info.value)
    finally:
        kernel_choice.fla_import_error.cache_clear()


def test_on_cuda_with_fla_importable_fla_is_fla_and_auto_stays_triton():
    from tests.support import fake_fla

    with fake_fla.installed():
        assert resolve_recurrent_kernels("auto", CUDA) == TRITON
        assert resolve_recurrent_kernels("fla", CUDA) == FLA
        assert resolve_recurrent_kernels("torch", CUDA) == TORCH


def test_only_resolved_choices_are_set():
    with pytest.raises(SpecbenchError, match="resolved"):
        set_recurrent_kernels(torch.nn.Linear(1, 1), "auto")


def test_the_fla_paths_are_declared_opt_in_for_hybrid_targets():
    declared = {p.name: p for p in PATHS}
    for name in (CHUNK_PATH, RECURRENT_PATH):
        assert declared[name].production_on == () and declared[name].target_kind == HYBRID
        assert declared[name].needs_cuda


def test_production_modules_import_without_fla():
    """fla is imported inside the kernel calls only (its import needs a CUDA driver): the engine's modules load in a
    process where `import fla` fails."""
    code = ("import sys; sys.modules['fla'] = None\n"
            "import specbench.recurrent.gated_delta_net, specbench.recurrent.fla_kernels, specbench.engine.builder\n"
            "import specbench.llm\n"
            "assert 'fla.ops' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("recurrent_choice")
    build_tiny_hybrid(root / "hybrid", seed=0)
    build_tiny_model(root / "dense", "qwen3", num_layers=1, seed=5)
    return root


@pytest.mark.slow  # ~4-9 s on 2 busy cores: the -m 'not slow' subset stays under 5 min
def test_the_engine_refuses_fla_on_cpu_and_records_the_resolved_choice(checkpoints):
    common = {"dtype": "fp32", "device": "cpu", "block_size": 4, "max_concurrency": 2}
    with pytest.raises(SpecbenchError, match="need a CUDA device"):
        LLM(str(checkpoints / "hybrid"), recurrent_kernels="fla", **common)
    llm = LLM(str(checkpoints / "hybrid"), recurrent_kernels="auto", **common)
    assert llm.engine.parts.recurrent_kernels == TORCH
    layers = [m for m in llm.engine.runner.model.modules() if isinstance(m, kernel_choice.RunsRecurrentKernels)]
    assert len(layers) == 2 and all(layer.recurrent_kernels == TORCH for layer in layers)
    # a target without recurrent layers records none
    assert LLM(str(checkpoints / "dense"), **common).engine.parts.recurrent_kernels is None


def test_the_cli_refuses_fla_on_cpu_in_one_line(checkpoints):
    result = run_main("generate", "--target", str(checkpoints / "hybrid"), "-p", "hi", "--max-tokens", "2",
                      "--recurrent-kernels", "fla", "--device", "cpu", "--dtype", "fp32")
    assert result.exit_code != 0
    assert_one_clean_error(result, "fla-core's Triton kernels need a CUDA device")


@pytest.mark.slow
def test_a_sweep_manifest_records_the_resolved_kernels(checkpoints, tmp_path):
    result = run_main("sweep", "--target", str(checkpoints / "hybrid"), "--recurrent-kernels", "auto", "-w", "gsm8k",
                      "-n", "1", "--max-tokens", "4", "-c", "1", "--no-speedup", "--results-dir", str(tmp_path), "-q",
                      "--device", "cpu", "--dtype", "fp32")
    assert result.exit_code == 0, result.stderr
    manifest = json.loads(next(tmp_path.glob("*/manifest.json")).read_text())
    assert manifest["recurrent_kernels"] == "torch"  # auto on CPU
    assert manifest["engine_config"]["recurrent_kernels"] == "auto"  # the option as given
