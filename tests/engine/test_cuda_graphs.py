"""CUDA-graph runners reproduce eager mode exactly: tokens, acceptance and the KV cache they write.

On CPU the runners "replay" by rerunning the forward on their static buffers through the Triton interpreter,
which tests everything but the capture itself (bucket padding, slot -1, per-step metadata reloads); on a GPU the
same tests replay real graphs.
"""

from __future__ import annotations


import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

pytestmark = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)

from specbench import LLM, SamplingParams  # noqa: E402
from specbench.engine.builder import capture_graphs, graph_plan  # noqa: E402
from specbench.runtime.cuda_graph import batch_buckets  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def build(target: str, graphs: bool, dtype: str = "fp32", **kwargs) -> LLM:
    # Small pool: the CPU interpreter copies the whole cache on every launch.
    llm = LLM(target, dtype=dtype, device=DEVICE, block_size=4, max_concurrency=6, num_kv_blocks=96,
              attention_backend="triton", enforce_eager=True, **kwargs)
    engine = llm.engine
    if graphs:
        plan = graph_plan(llm.config, engine.device, engine.stop_checker.max_model_len)
        capture_graphs(plan, engine.runner, engine.proposer, llm.config.max_num_steps)
    return llm


def run(llm: LLM, prompts, max_tokens: int):
    outs = llm.generate(prompts, SamplingParams(max_tokens=max_tokens, ignore_eos=True))
    return [(list(o.output_token_ids), o.stats.num_accepted_per_pos, o.stats.num_draft_rounds) for o in outs]


@pytest.fixture(scope="module")
def prompts(prompt_ids) -> list[list[int]]:
    return prompt_ids[:5]  # 5 requests: the batch pads to bucket 6, then shrinks through 4, 3, 2, 1 as they finish


def test_buckets_cover_every_batch_size():
    assert batch_buckets(1) == (1,)
    assert batch_buckets(6) == (1, 2, 3, 4, 6)
    assert batch_buckets(64) == (1, 2, 3, 4, 8, 16, 32, 48, 64)


@pytest.mark.slow  # graphs captured and replayed eagerly on CPU: 8-17 s per method
@pytest.mark.parametrize("method", ["none", "draft"])
def test_graph_replays_match_eager(tiny_pair, prompts, method):
    target, draft = tiny_pair
    kwargs = dict(method="draft", draft=draft, max_num_steps=3) if method == "draft" else {}
    eager = build(target, graphs=False, **kwargs)
    graphed = build(target, graphs=True, **kwargs)
    lengths = [6, 9, 12, 7, 10]  # requests finish at different steps: every bucket size gets used
    expected = [run(eager, [p], n)[0] for p, n in zip(prompts, lengths)]
    params = [SamplingParams(max_tokens=n, ignore_eos=True) for n in lengths]
    got = [(list(o.output_token_ids), o.stats.num_accepted_per_pos, o.stats.num_draft_rounds)
           for o in graphed.generate(prompts, params)]
    assert got == expected
    assert graphed.engine.runner.graphs.num_replays > 0
    if method == "draft":
        assert graphed.engine.proposer.draft_graphs.steps.num_replays > 0


@pytest.mark.slow  # ~10 s on CPU
def test_padding_requests_never_write_kv(tiny_pair, prompts):
    """Same batch eager and graphed: the caches end equal (up to matmul blocking, which depends on the padded
    row count), so padding (slot -1) wrote nowhere; a write at slot -1 would land in the never-used last slot."""
    target, draft = tiny_pair
    kwargs = dict(method="draft", draft=draft, max_num_steps=2)
    caches = []
    for graphs in (False, True):
        llm = build(target, graphs=graphs, **kwargs)
        run(llm, prompts, 6)
        engine = llm.engine
        caches.append([t.clone() for t in engine.runner.kv_cache.k + engine.proposer.kv_cache.v])
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(*caches))
    assert not any(t.flatten(0, 1)[-1].any() for t in caches[1])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_gpu_default_engine_uses_graphs_and_matches_enforce_eager(tiny_pair, prompt_ids, dtype):
    """8 requests in lockstep fill bucket 8 exactly: the graphs run the very kernels eager mode runs, so tokens are
    identical even in bf16. With padding (5 ragged requests) GEMMs see more rows and may round differently: exact
    in fp32 here, and reported for bf16."""
    target, draft = tiny_pair
    kwargs = dict(method="draft", draft=draft, max_num_steps=3, dtype=dtype, device="cuda", max_concurrency=8,
                  num_kv_blocks=512, block_size=16)
    graphed = LLM(target, **kwargs)
    eager = LLM(target, enforce_eager=True, **kwargs)
    assert graphed.engine.parts.cuda_graphs == "on" and eager.engine.parts.cuda_graphs == "off: enforce_eager"
    params = SamplingParams(max_tokens=48, ignore_eos=True)
    got = [list(o.output_token_ids) for o in graphed.generate(prompt_ids, params)]
    expected = [list(o.output_token_ids) for o in eager.generate(prompt_ids, params)]
    assert got == expected
    assert graphed.engine.runner.graphs.num_replays > 0
    assert graphed.engine.proposer.draft_graphs.steps.num_replays > 0

    ragged = [SamplingParams(max_tokens=n, ignore_eos=True) for n in (20, 33, 41, 27, 48)]
    got = [list(o.output_token_ids) for o in graphed.generate(prompt_ids[:5], ragged)]
    expected = [list(o.output_token_ids) for o in eager.generate(prompt_ids[:5], ragged)]
    same = sum(a == b for x, y in zip(got, expected) for a, b in zip(x, y)) / sum(map(len, expected))
    from tests.support.gpu_report import record_gpu_result

    record_gpu_result(f"cuda_graphs_vs_eager_padded_{dtype}", same)
    assert same == 1.0 if dtype == "fp32" else same > 0.9
