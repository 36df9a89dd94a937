"""The decoder's MoE layers take the fused expert kernels for decode and verify batches and the torch reference
elsewhere; padded rows of a graph batch (slot PADDING_SLOT) route nowhere. CPU under TRITON_INTERPRET=1, and on a
GPU: the engine's greedy tokens (CUDA graphs, fused experts) against HF transformers.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from tests.support.gpu_report import record_gpu_result  # noqa: E402
from tests.support.interpreted import assert_passes_interpreted  # noqa: E402
from tests.support.tiny_models import build_tiny_model  # noqa: E402

from specbench.attention import build_metadata, create_backend  # noqa: E402
from specbench.attention.metadata import PADDING_SLOT  # noqa: E402
from tests.support.kernel_testing import kernels_runnable_here  # noqa: E402
from specbench.kv.kv_cache import KVCache  # noqa: E402
from specbench.models import DecoderLM, get_preset  # noqa: E402
from specbench.models import fused_kernels as fused  # noqa: E402
from specbench.models.moe import MoeMLP  # noqa: E402
from specbench.models.moe_forward import moe_forward, uses_fused_experts  # noqa: E402

RERUN_REASON = "triton was imported before TRITON_INTERPRET=1; test_interpreted_moe_tests_pass_in_a_fresh_process"
runnable = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
BLOCK_SIZE = 4


def _tiny_moe_model() -> DecoderLM:
    model = DecoderLM(get_preset("tiny-qwen3-moe"), create_backend("torch"), dtype=torch.float32, device=DEVICE)
    model.init_random_weights(seed=0, std=0.1)
    return model


def _decode_metadata(num_tokens: int, num_padded: int):
    """One query per request at position 5 (blocks 1, 2 each); the last `num_padded` rows are graph padding."""
    slots = [(2 * r + 2) * BLOCK_SIZE + 1 for r in range(num_tokens)]
    slots[num_tokens - num_padded:] = [PADDING_SLOT] * num_padded
    return build_metadata(positions=[5] * num_tokens, num_query=[1] * num_tokens, seq_lens=[6] * num_tokens,
                          block_tables=[[2 * r + 1, 2 * r + 2] for r in range(num_tokens)], block_size=BLOCK_SIZE,
                          device=DEVICE, slot_mapping=slots)


@runnable
def test_fused_only_for_decode_sized_batches():
    mlp = _tiny_moe_model().layers[1].mlp
    x = torch.zeros(64, 8, device=DEVICE)
    fused.set_policy(mlp, "on")
    assert uses_fused_experts(mlp, x) and uses_fused_experts(mlp, x[:1])
    assert not uses_fused_experts(mlp, torch.zeros(65, 8, device=DEVICE))  # prefill: the reference
    fused.set_policy(mlp, "off")
    assert not uses_fused_experts(mlp, x)


@runnable
@torch.no_grad()
def test_decoder_routes_prefill_to_reference_and_decode_to_kernels(monkeypatch):
    """Under the "gemv" set a fused prefill past 64 tokens takes the reference loop; under the default "auto" set
    the grouped GEMM (prefill_experts); one token the kernels either way."""
    from specbench.models.moe_kernel_sets import set_moe_kernels

    model = _tiny_moe_model()
    set_moe_kernels(model, "gemv")
    calls = []
    for path in ("reference_experts", "fused_experts", "prefill_experts"):
        original = getattr(MoeMLP, path)
        monkeypatch.setattr(MoeMLP, path, lambda self, *a, _o=original, _p=path, **k: calls.append(_p) or _o(
            self, *a, **k))
    kv = KVCache(model.kv_cache_spec(), 64, BLOCK_SIZE, DEVICE)
    prompt = list(range(3, 73))  # 70 tokens: past the kernels' 64
    md = build_metadata(positions=list(range(70)), num_query=[70], seq_lens=[70],
                        block_tables=[list(range(1, 19))], block_size=BLOCK_SIZE, device=DEVICE)
    fused.set_policy(model, "off")  # the interpreter would take seconds over 70 rows of every other kernel
    model(torch.tensor(prompt, device=DEVICE), md, kv)
    assert calls == ["reference_experts"]  # one MoE layer (tiny-qwen3-moe: layer 1)
    calls.clear()
    fused.set_policy(model, "on")
    moe_forward(model.layers[1].mlp, torch.randn(70, 64, device=DEVICE), md)  # prefill-sized: past the 64
    assert calls == ["reference_experts"]
    calls.clear()
    set_moe_kernels(model, "auto")
    moe_forward(model.layers[1].mlp, torch.randn(70, 64, device=DEVICE), md)
    assert calls == ["prefill_experts"]
    calls.clear()
    md = build_metadata(positions=[70], num_query=[1], seq_lens=[71], block_tables=[list(range(1, 19))],
                        block_size=BLOCK_SIZE, device=DEVICE)
    model(torch.tensor([9], device=DEVICE), md, kv)
    assert calls == ["fused_experts"]


@runnable
@torch.no_grad()
def test_graph_capture_takes_the_kernels_in_chunks(monkeypatch):
    """Under capture, past 64 rows and under the "off" policy alike, the kernels run 64 rows at a time (the
    reference's gathers would sync the host); each row as the reference computes it."""
    from specbench.models import moe_forward as module

    mlp = _tiny_moe_model().layers[1].mlp
    x = torch.randn(150, mlp.config.hidden_size, device=DEVICE)
    md = _decode_metadata(150, 0)
    fused.set_policy(mlp, "off")
    expected = moe_forward(mlp, x, md)
    monkeypatch.setattr(module, "is_capturing", lambda _: True)
    calls = []
    original = MoeMLP.fused_experts
    monkeypatch.setattr(MoeMLP, "fused_experts", lambda self, *a: calls.append(a[0].shape[0]) or original(
        self, *a))
    got = moe_forward(mlp, x, md)
    assert calls == [64, 64, 22]
    torch.testing.assert_close(got, expected, atol=2e-6, rtol=2e-5)


@runnable
@pytest.mark.parametrize("policy", ["on", "off"])
@torch.no_grad()
def test_padded_rows_route_nowhere(policy):
    """Garbage (NaN) in padded rows neither reaches a real row nor wakes an expert; padded rows come out zero."""
    mlp = _tiny_moe_model().layers[1].mlp
    num_real, num_padded = 5, 3
    x = torch.randn(num_real + num_padded, mlp.config.hidden_size, device=DEVICE)
    x[num_real:] = float("nan")
    fused.set_policy(mlp, policy)
    padded = moe_forward(mlp, x, _decode_metadata(num_real + num_padded, num_padded))
    alone = moe_forward(mlp, x[:num_real], _decode_metadata(num_real, 0))
    assert (padded[num_real:] == 0).all()
    # Close, not equal: the router GEMM over 8 rows may sum in another order than over 5.
    torch.testing.assert_close(padded[:num_real], alone, atol=2e-6, rtol=2e-5)


@pytest.mark.slow  # ~2.5-3 s: the -m 'not slow' subset stays under 5 min on 2 busy cores
@runnable
def test_engine_with_fused_experts_matches_hf(tmp_path):
    """Plain greedy decoding with every fused kernel on (interpreted on CPU) == HF transformers' generate."""
    from transformers import AutoModelForCausalLM

    from specbench import LLM, SamplingParams

    build_tiny_model(tmp_path, "qwen3_moe", seed=0, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                     norm_topk_prob=True)
    prompts, max_tokens = [[5, 17, 300, 42, 9, 77], [100, 200, 300]], 8
    hf = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    hf.generation_config.eos_token_id = None
    expected = []
    for ids in prompts:
        x = torch.tensor([ids])
        y = hf.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_tokens, do_sample=False,
                        pad_token_id=0)
        expected.append(y[0, len(ids):].tolist())
    llm = LLM(str(tmp_path), dtype="fp32", device=str(DEVICE), block_size=BLOCK_SIZE, max_concurrency=2,
              kv_cache_gb=0.05, fused_kernels="on")
    outs = llm.generate(prompts, SamplingParams(max_tokens=max_tokens, ignore_eos=True))
    got = [list(o.output_token_ids) for o in outs]
    if DEVICE.type == "cpu":
        assert got == expected
    else:  # fp32 GEMMs on the GPU sum in other orders than on the CPU: report, and catch gross corruption only
        same = sum(a == b for g, e in zip(got, expected) for a, b in zip(g, e))
        record_gpu_result("qwen3_moe_fused_fp32_vs_hf", same / sum(map(len, expected)))
        assert same / sum(map(len, expected)) > 0.5


@pytest.mark.skipif(kernels_runnable_here(), reason="the interpreted tests run in this process")
def test_interpreted_moe_tests_pass_in_a_fresh_process():
    assert_passes_interpreted(__file__)


@pytest.mark.gpu
@needs_cuda
def test_gpu_graph_replay_with_fused_experts_matches_eager(tmp_path):
    """CUDA graphs (padded decode buckets) with the fused experts == eager decoding, token for token in fp32,
    speculative (verify batches of k + 1) included."""
    from specbench import LLM, SamplingParams

    build_tiny_model(tmp_path, "qwen3_moe", seed=0, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                     norm_topk_prob=True)
    prompts = [[5, 17, 300, 42, 9, 77], [100, 200, 300], [7, 8, 9, 10, 11, 12, 13], [400, 401]]  # 3 pads to 4
    params = SamplingParams(max_tokens=16, ignore_eos=True)
    results = {}
    for eager in (True, False):
        for method in ("none", "ngram"):
            llm = LLM(str(tmp_path), dtype="fp32", device="cuda", block_size=BLOCK_SIZE, max_concurrency=3,
                      kv_cache_gb=0.05, enforce_eager=eager, method=method, max_num_steps=3 if method == "ngram" else 0,
                      ngram_min=1, ngram_max=3)
            results[eager, method] = [list(o.output_token_ids) for o in llm.generate(prompts, params)]
    assert results[False, "none"] == results[True, "none"]
    assert results[False, "ngram"] == results[True, "none"]
