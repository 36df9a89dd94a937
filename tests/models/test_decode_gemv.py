"""One-token blocks on the fused GEMV path (models/decode_gemv.py) == the torch path: decoders and EAGLE heads,
logits, aux states (the stream entering each layer) and the K/V written, over several decode steps."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch

pytest.importorskip("triton")

from tests.support.head_modules import random_eagle_head, randomize  # noqa: E402
from tests.support.interpreted import assert_passes_interpreted  # noqa: E402

from specbench.attention import build_metadata, create_backend  # noqa: E402
from specbench.kernels.testing import kernels_runnable_here  # noqa: E402
from specbench.kv.kv_cache import KVCache  # noqa: E402
from specbench.models import DecoderLM, decode_gemv, get_preset  # noqa: E402
from specbench.models import fused_kernels as fused  # noqa: E402

RERUN_REASON = "triton was imported before TRITON_INTERPRET=1; test_interpreted_tests_pass_in_a_fresh_process"
runnable = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
BLOCK_SIZE = 4
PROMPT = [5, 9, 11, 3, 7, 21, 2]
NUM_DECODE_STEPS = 2
TOL = {torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


def metadata(start: int, num_tokens: int):
    return build_metadata(positions=list(range(start, start + num_tokens)), num_query=[num_tokens],
                          seq_lens=[start + num_tokens], block_tables=[[3, 1, 4, 2, 5]], block_size=BLOCK_SIZE,
                          device=DEVICE)


@pytest.fixture
def gemv_calls(monkeypatch) -> list[int]:
    """The token count of each fused GEMV launch."""
    calls: list[int] = []
    real = fused.gemv

    def counted(x, weight, **kwargs):
        calls.append(x.shape[0])
        return real(x, weight, **kwargs)

    monkeypatch.setattr(fused, "gemv", counted)
    return calls


def assert_close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    tol = TOL[dtype]  # the model's dtype (logits come back fp32)
    scale = want.float().abs().max().item()
    torch.testing.assert_close(got.float(), want.float(), atol=tol * scale, rtol=tol, msg=what)


@runnable
@pytest.mark.parametrize("preset, dtype", [
    ("tiny-llama", torch.float32), ("tiny-llama", torch.float16), ("tiny-qwen3", torch.float16),
    ("tiny-qwen2", torch.float32),
], ids=str)
def test_decoder_one_token_steps_match_the_torch_path(preset, dtype, gemv_calls):
    config = replace(get_preset(preset), num_hidden_layers=3)
    model = DecoderLM(config, create_backend("torch"), dtype=dtype, device=DEVICE)
    model.init_random_weights()
    randomize(model, seed=1)
    aux_ids = (0, 2, 3)
    runs = {}
    for policy in ("off", "on"):
        kv = KVCache(model.kv_cache_spec(), 6, BLOCK_SIZE, DEVICE)
        outputs = []
        with fused.fused_kernels(policy), torch.no_grad():
            for start, ids in [(0, PROMPT), *((len(PROMPT) + i, [40 + i]) for i in range(NUM_DECODE_STEPS))]:
                out = model(torch.tensor(ids, device=DEVICE), metadata(start, len(ids)), kv, aux_layer_ids=aux_ids)
                outputs.append((model.compute_logits(out.hidden_states), out.aux_hidden_states))
        runs[policy] = outputs, kv
    # qkv_proj has a bias in Qwen2: those blocks keep the eager chain.
    num_gemv = 0 if config.attention_bias else NUM_DECODE_STEPS * config.num_hidden_layers * 4
    assert gemv_calls == [1] * num_gemv
    for step, ((got_logits, got_aux), (want_logits, want_aux)) in enumerate(zip(runs["on"][0], runs["off"][0])):
        assert_close(got_logits, want_logits, dtype, f"logits, forward {step}")
        assert_close(got_aux, want_aux, dtype, f"aux states, forward {step}")
    for got, want in zip(runs["on"][1].k + runs["on"][1].v, runs["off"][1].k + runs["off"][1].v):
        assert_close(got, want, dtype, "K/V")


@runnable
@pytest.mark.parametrize("method, num_layers, norm_before_residual, num_gemv_per_step, dtype", [
    ("eagle3", 1, False, 3, torch.float32),  # EAGLE-3's first layer: o_proj, gate_up, down (qkv reads a concat)
    ("eagle3", 2, True, 3 + 4, torch.float16),
    ("eagle", 2, False, 4, torch.float16),  # EAGLE-1's first layer has no input norm: the eager chain
], ids=str)
def test_eagle_head_draft_steps_match_the_torch_path(method, num_layers, norm_before_residual, num_gemv_per_step,
                                                     dtype, gemv_calls):
    head = random_eagle_head(method, num_layers, norm_before_residual, False, dtype, DEVICE)
    gen = torch.Generator().manual_seed(3)
    width = head.shape.fc_in_features if head.is_eagle3 else head.config.hidden_size
    features = torch.randn(len(PROMPT), width, generator=gen).to(DEVICE, dtype)
    with torch.no_grad(), fused.fused_kernels("off"):
        kv = KVCache(head.kv_cache_spec(), 6, BLOCK_SIZE, DEVICE)
        out = head(torch.tensor(PROMPT, device=DEVICE), head.project_target_features(features), metadata(0, 7), kv,
                   "draft")
    results = {}
    for policy in ("off", "on"):
        step_kv, hidden = copy.deepcopy(kv), out.hidden[-1:]
        steps = []
        with torch.no_grad(), fused.fused_kernels(policy):
            for i in range(3):  # draft steps feed the head its own output
                step = head(torch.tensor([60 + i], device=DEVICE), hidden, metadata(len(PROMPT) + i, 1), step_kv,
                            "draft")
                hidden = step.hidden
                steps.append((step.hidden, head.compute_logits(step.logits_input)))
        results[policy] = steps, step_kv
    assert gemv_calls == [1] * (3 * num_gemv_per_step)
    for i, ((got_h, got_l), (want_h, want_l)) in enumerate(zip(results["on"][0], results["off"][0])):
        assert_close(got_h, want_h, dtype, f"hidden, step {i}")
        assert_close(got_l, want_l, dtype, f"logits, step {i}")
    for got, want in zip(results["on"][1].k + results["on"][1].v, results["off"][1].k + results["off"][1].v):
        assert_close(got, want, dtype, "K/V")


def test_more_tokens_take_the_eager_chain():
    model = DecoderLM(replace(get_preset("tiny-llama"), num_hidden_layers=1), create_backend("torch"),
                      dtype=torch.float32, device="cpu")
    layer = model.layers[0]
    x = torch.zeros(decode_gemv.MAX_TOKENS + 1, model.config.hidden_size)
    with fused.fused_kernels("on" if kernels_runnable_here() else "off"):
        assert not decode_gemv.applies(layer, x)
        assert not decode_gemv.applies(layer, x[:0])
    with fused.fused_kernels("off"):
        assert not decode_gemv.applies(layer, x[:1])


@pytest.mark.skipif(kernels_runnable_here(), reason="the interpreted tests run in this process")
def test_interpreted_tests_pass_in_a_fresh_process():
    assert_passes_interpreted(__file__)
