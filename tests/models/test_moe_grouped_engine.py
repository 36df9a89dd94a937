"""The "grouped" MoE kernel set (and the default "auto" one: its prefill GEMM only) through the engine (CPU interpreter, fp32, tiny Qwen3-MoE): greedy n-gram
speculation (verify batches of up to 4 tokens) and a 70-token prompt (prefill past 64 tokens) give the unfused
engine's tokens, and the engine records both of the set's paths."""

from __future__ import annotations

import functools

import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

from specbench import LLM, SamplingParams  # noqa: E402
from specbench.config import EngineConfig  # noqa: E402
from specbench.errors import SpecbenchError  # noqa: E402
from specbench.models.moe_kernel_sets import FEW_TOKEN_PATH, PREFILL_PATH  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
EXPERT_SCALE = 300.0
ROUTER_SCALE = 30.0


def _build(fused: str, moe_kernels: str, fault: str | None = None) -> LLM:
    from specbench.faults import injection
    from specbench.models.moe import MoeMLP

    llm = LLM("tiny-qwen3-moe", load_format="dummy", dtype="fp32", device=DEVICE, num_kv_blocks=256, seed=0,
              fused_kernels=fused, moe_kernels=moe_kernels, enforce_eager=True, method="ngram", max_num_steps=3,
              ngram_min=1, ngram_max=3, max_concurrency=2, fault=injection(fault))
    # Dummy experts add ~1e-3 to the stream and their routing weights are near-even: made to matter and peaked, so
    # a wrong expert sum or a swapped weight shows in the tokens.
    with torch.no_grad():
        for module in llm.engine.runner.model.modules():
            if isinstance(module, MoeMLP):
                module.down_weight.mul_(EXPERT_SCALE)
                module.router.weight.mul_(ROUTER_SCALE)
    return llm


def _generate(fused: str, moe_kernels: str, fault: str | None = None):
    llm = _build(fused, moe_kernels, fault)
    prompts = [[5, 6, 7, 8] * 4, [(3 * i) % 97 + 1 for i in range(70)]]  # a repeating one (drafts), a long one
    outs = llm.generate(prompts, SamplingParams(max_tokens=8, ignore_eos=True))
    return [list(o.output_token_ids) for o in outs], llm


@functools.lru_cache(maxsize=None)
def _unfused_tokens() -> list[list[int]]:
    return _generate("off", "gemv")[0]


@pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)
@pytest.mark.slow  # tens of seconds under the interpreter
def test_grouped_set_matches_the_unfused_engine():
    expected = _unfused_tokens()
    got, llm = _generate("on", "grouped")  # EngineConfig.moe_kernels (--moe-kernels) reaches every MoE layer
    assert got == expected
    assert {m.moe_kernels for m in llm.engine.runner.model.modules() if hasattr(m, "moe_kernels")} == {"grouped"}
    assert {FEW_TOKEN_PATH, PREFILL_PATH} <= llm.engine.paths_taken()


@pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)
@pytest.mark.slow  # tens of seconds under the interpreter
def test_the_default_auto_set_prefills_grouped_and_verifies_with_gemv():
    """The default set: the grouped GEMM for the 70-token prompt's prefill, gemv for the verify batches (never the
    few-token down-combine), and the unfused engine's tokens; the prefill mutant is caught there."""
    assert EngineConfig().moe_kernels == "auto"
    got, llm = _generate("on", "auto")
    assert got == _unfused_tokens()
    assert PREFILL_PATH in llm.engine.paths_taken() and FEW_TOKEN_PATH not in llm.engine.paths_taken()
    bent, _ = _generate("on", "auto", "moe-prefill-rows-shifted")
    assert bent != _unfused_tokens()


def test_an_unknown_set_is_refused_with_the_supported_ones():
    with pytest.raises(SpecbenchError, match="auto, gemv, grouped"):
        EngineConfig(moe_kernels="fast")


@pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)
@pytest.mark.slow  # three interpreted engines
@pytest.mark.parametrize("fault", ["moe-combine-weight-swapped", "moe-verify-rows-shared", "moe-prefill-rows-shifted"])
def test_each_grouped_set_mutant_changes_the_engines_tokens(fault):
    # Injected as `specbench --inject` does (the mutant bends the built engine's MoE layers): greedy tokens differ
    # from the unfused engine's, which the clean grouped engine's equal (the test above); the unfused engine runs no
    # interpreted kernel, so it is the cheap side to compare with.
    bent, _ = _generate("on", "grouped", fault)
    assert bent != _unfused_tokens()
