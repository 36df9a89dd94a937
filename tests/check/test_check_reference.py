"""Issue 25 item 3: the checks' reference is an engine that shares no code with the fast path (check/reference.py),
and the selftest checks that reference itself against HF transformers on the tiny target."""

from __future__ import annotations

import pytest
import torch

from specbench.check.greedy import greedy_params, reference_outputs
from specbench.check.reference import build_reference_llm, reference_drafting_engine, reference_engine
from specbench.check.setup import build_llm, prompt_list
from specbench.engine.step_loop import StepLoop
from specbench.models.layers import RotaryEmbedding
from specbench.selftest.hf_reference import cross_check_reference
from specbench.selftest.runner import selftest_setups
from specbench.selftest.tiny import VOCAB_SIZE, variant_for_seed


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return selftest_setups(str(tmp_path_factory.mktemp("reference")), 0, ("draft",), 3)["draft"]


def test_the_reference_is_synchronous_eager_and_unfused(setup):
    production = setup.engine.__class__(**{**setup.engine.to_dict(), "attention_backend": "triton",
                                           "verifier": "triton", "fused_kernels": "on",
                                           "debug_invariants": True})
    for config in (reference_engine(production), reference_drafting_engine(production)):
        assert (config.async_scheduling, config.enforce_eager, config.fused_kernels, config.attention_backend,
                config.verifier, config.debug_invariants) == (False, True, "off", "torch", "torch", False)
        assert (config.target, config.dtype, config.device, config.seed) == (
            production.target, production.dtype, production.device, production.seed)
    assert reference_engine(production).method == "none"
    assert (reference_drafting_engine(production).method, reference_drafting_engine(production).draft) == (
        production.method, production.draft)
    assert build_reference_llm(production).engine.async_scheduling is False


def test_a_bug_in_the_overlapped_plain_loop_cannot_corrupt_the_reference(setup, monkeypatch):
    clean = reference_outputs(setup)
    launch = StepLoop._launch_plain_decode

    def stale_input(self, batch, start, newest_token_ids):  # the lookahead step is fed a wrong token
        wrong = None if newest_token_ids is None else (newest_token_ids + 1) % VOCAB_SIZE
        return launch(self, batch, start, wrong)

    monkeypatch.setattr(StepLoop, "_launch_plain_decode", stale_input)
    overlapped = build_llm(setup, speculative=False).generate(prompt_list(setup), greedy_params(setup))
    assert [o.output_token_ids for o in overlapped] != clean  # the engine's own plain loop is now wrong (the old
    assert reference_outputs(setup) == clean  # reference), the reference engine is not


def test_the_reference_agrees_with_transformers(setup):
    result = cross_check_reference(setup.engine.target, setup.prompts, setup.max_tokens, reference_outputs(setup))
    assert result.is_agreed, result.detail
    assert f"{len(setup.prompts)}/{len(setup.prompts)} prompts identical" in result.detail


def test_the_qwen3_variant_agrees_with_its_own_transformers_class(tmp_path):
    """The q/k-norm variant loads as Qwen3ForCausalLM: as LlamaForCausalLM its norms were dropped and every such
    seed's greedy check was a false alarm (the 30-seed selftest found it)."""
    seed = next(s for s in range(8) if variant_for_seed(s) == "qwen3")
    setup = selftest_setups(str(tmp_path), seed, ("draft",), 3)["draft"]
    result = cross_check_reference(setup.engine.target, setup.prompts, setup.max_tokens, reference_outputs(setup))
    assert result.is_agreed and "Qwen3ForCausalLM" in result.detail, result.detail


def test_a_bug_in_the_shared_eager_layers_is_caught_by_transformers(setup, monkeypatch):
    # RoPE rotating the wrong way: the reference and the engine under test agree on the wrong tokens (both run the
    # eager layers); only the outside implementation disagrees.
    apply = RotaryEmbedding.apply
    backwards = torch.tensor([1.0, -1.0])[:, None]  # [2, 1]: cos kept, sin negated

    monkeypatch.setattr(RotaryEmbedding, "apply", staticmethod(lambda x, cos_sin: apply(x, cos_sin * backwards)))
    reference = reference_outputs(setup)
    result = cross_check_reference(setup.engine.target, setup.prompts, setup.max_tokens, reference)
    assert not result.is_agreed and "first divergence" in result.detail, result.detail
