"""MoE targets through the engine with every fused kernel on (the CPU interpreter): greedy output == HF transformers'
generate in fp32. Decode and verify batches take the fused attention half (models/decode_gemv.py: q/k/v/o biases
in the gemv epilogues, RoPE + K/V store in qkv's, or the q/k norm + RoPE + store kernel), the one-launch routing
and the expert kernels; prefills of more than 64 tokens the eager chain. gpt-oss (sliding window 5, sinks, router and
expert biases) and GLM-4.5 (dense first layer, sigmoid routing with a correction bias, shared expert, q/k norm with
q/k/v biases, partial RoPE)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from tests.support.hf_greedy import hf_greedy_outputs, tiny_prompt_ids  # noqa: E402
from tests.support.interpreted import assert_passes_interpreted  # noqa: E402
from tests.support.kernel_testing import kernels_runnable_here  # noqa: E402
from tests.support.sink_models import build_sink_target  # noqa: E402
from tests.support.tiny_models import build_tiny_model  # noqa: E402

from specbench import LLM, SamplingParams  # noqa: E402

RERUN_REASON = "triton was imported before TRITON_INTERPRET=1; test_interpreted_tests_pass_in_a_fresh_process"
runnable = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
MAX_TOKENS = 12
GLM = {"n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "n_shared_experts": 1,
       "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "routed_scaling_factor": 2.5,
       "attention_bias": True, "use_qk_norm": True, "rope_scaling": {"partial_rotary_factor": 0.5}}


@pytest.fixture(scope="module", params=["gpt_oss", "glm4_moe"])
def case(request, tmp_path_factory):
    """(target dir, HF greedy outputs)."""
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp(request.param)
    if request.param == "gpt_oss":
        target, _ = build_sink_target(root, "gpt_oss")
    else:
        target = root / "target"
        model = build_tiny_model(target, "glm4_moe", seed=0, **GLM)
        with torch.no_grad():  # a bias that changes which experts win
            model.model.layers[1].mlp.gate.e_score_correction_bias.copy_(0.1 * torch.randn(8))
        model.save_pretrained(target)
    hf = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).eval()
    return target, hf_greedy_outputs(hf, tiny_prompt_ids(), MAX_TOKENS)


@runnable
@pytest.mark.slow  # about 40 s each under the interpreter on 2 cores
@pytest.mark.parametrize("method", ["none", "ngram"])
def test_fused_engine_matches_hf(case, method):
    target, expected = case
    llm = LLM(str(target), dtype="fp32", device=DEVICE, block_size=4, max_concurrency=4, kv_cache_gb=0.25,
              fused_kernels="on", enforce_eager=True, method=method, max_num_steps=3 if method == "ngram" else 0,
              ngram_min=1, ngram_max=3)
    outs = llm.generate(tiny_prompt_ids(), SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    got = [list(o.output_token_ids) for o in outs]
    if DEVICE == "cpu":
        assert got == expected
    else:  # fp32 GEMMs on the GPU sum in other orders than on the CPU: catch gross corruption only
        same = sum(a == b for g, e in zip(got, expected) for a, b in zip(g, e))
        assert same / sum(map(len, expected)) > 0.5


@pytest.mark.skipif(kernels_runnable_here(), reason="the interpreted tests run in this process")
def test_interpreted_tests_pass_in_a_fresh_process():
    assert_passes_interpreted(__file__)
