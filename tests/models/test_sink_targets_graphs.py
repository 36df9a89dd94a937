"""gpt-oss and Gemma-3 through the Triton backend with CUDA-graph runners (on CPU: replays rerun the captured forward
on the static buffers through the Triton interpreter; on a GPU, real graphs): greedy tokens equal HF transformers'
for plain decoding and the draft LM, so the sinks, the window and the per-layer RoPE survive graph capture, padded
buckets and per-step metadata reloads."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from specbench import LLM, SamplingParams
from specbench.engine.builder import capture_graphs, graph_plan
from tests.support.hf_greedy import hf_greedy_outputs, tiny_prompt_ids
from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here
from tests.support.sink_models import build_sink_target

pytestmark = [pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON), pytest.mark.slow]

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
MAX_TOKENS = 10
PROMPTS = tiny_prompt_ids((6, 13, 9))


@pytest.fixture(scope="module", params=["gpt_oss", "gemma3"])
def case(request, tmp_path_factory):
    from transformers import AutoModelForCausalLM

    target, draft = build_sink_target(tmp_path_factory.mktemp("graphs"), request.param)
    hf = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).eval()
    return target, draft, hf_greedy_outputs(hf, PROMPTS, MAX_TOKENS)


def _graphed(target, **kwargs) -> list[list[int]]:
    llm = LLM(str(target), dtype="fp32", device=DEVICE, block_size=4, max_concurrency=4, num_kv_blocks=64,
              attention_backend="triton", enforce_eager=True, debug_invariants=True, **kwargs)
    engine = llm.engine
    plan = graph_plan(llm.config, engine.device, engine.stop_checker.max_model_len)
    capture_graphs(plan, engine.runner, engine.proposer, llm.config.max_num_steps)
    outs = llm.generate(PROMPTS, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    return [list(o.output_token_ids) for o in outs]


def test_plain_and_draft_with_graphs_match_hf(case):
    target, draft, expected = case
    assert _graphed(target) == expected
    assert _graphed(target, method="draft", draft=str(draft), max_num_steps=2) == expected
