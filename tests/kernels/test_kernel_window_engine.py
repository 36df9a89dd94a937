"""The engine through the Triton backend on a sliding-window target (every layer windowed, window shorter than the
prompts and than prompt + k): greedy tokens == HF transformers' generate. On CPU under the interpreter (eager); on
CUDA also through the verify and draft-step CUDA graphs, whose replays rebuild the window from their own buffers."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

pytestmark = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)

from tests.support.hf_greedy import hf_greedy_outputs, tiny_prompt_ids
from tests.support.window_models import build_window_target

from specbench import LLM, SamplingParams

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
MAX_TOKENS = 10


@pytest.fixture(scope="module")
def mistral(tmp_path_factory):
    from transformers import AutoModelForCausalLM

    built = build_window_target(tmp_path_factory.mktemp("window"), "mistral-w5")
    hf = AutoModelForCausalLM.from_pretrained(built.target, dtype=torch.float32).eval()
    prompts = tiny_prompt_ids((6, 13, 21))
    return built, prompts, hf_greedy_outputs(hf, prompts, MAX_TOKENS)


def _generate(built, prompts, **kwargs) -> list[list[int]]:
    # A small pool: the CPU interpreter copies every tensor argument (the whole cache) on each launch.
    llm = LLM(str(built.target), dtype="fp32", device=DEVICE, block_size=4, max_concurrency=4, num_kv_blocks=64,
              attention_backend="triton", debug_invariants=True, **kwargs)
    outs = llm.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    return [list(o.output_token_ids) for o in outs]


@pytest.mark.slow  # ~2.5-3 s: the -m 'not slow' subset stays under 5 min on 2 busy cores
def test_triton_draft_model_on_a_window_target_matches_hf(mistral):
    built, prompts, expected = mistral
    assert _generate(built, prompts, method="draft", draft=str(built.draft), max_num_steps=3) == expected


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("method", ["none", "draft", "ngram"])
def test_gpu_cuda_graphs_on_a_window_target_match_hf(mistral, method):
    built, prompts, expected = mistral
    kwargs = {"none": {}, "draft": dict(method="draft", draft=str(built.draft), max_num_steps=3),
              "ngram": dict(method="ngram", max_num_steps=3, ngram_min=1, ngram_max=3)}[method]
    assert _generate(built, prompts, **kwargs) == expected
