"""Blocks on the fused projection path (models/decode_gemv.py) == the torch path: decoders and EAGLE heads, logits,
aux states (the stream entering each layer) and the K/V written, over a prefill, a verify-sized forward and
one-token steps (the one-token path fuses the norms, the batched one runs them as kernels)."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch

pytest.importorskip("triton")

from tests.support.head_modules import random_eagle_head, randomize  # noqa: E402
from tests.support.interpreted import assert_passes_interpreted  # noqa: E402

from specbench.attention import build_metadata, create_backend  # noqa: E402
from tests.support.kernel_testing import kernels_runnable_here  # noqa: E402
from specbench.kv.kv_cache import KVCache  # noqa: E402
from specbench.models import DecoderLM, decode_gemv, get_preset  # noqa: E402
from specbench.models import fused_kernels as fused  # noqa: E402

RERUN_REASON = "triton was imported before TRITON_INTERPRET=1; test_interpreted_tests_pass_in_a_fresh_process"
runnable = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
BLOCK_SIZE = 4
PROMPT = [5, 9, 11, 3, 7, 21, 2]
# (first position, token ids) of each forward after the prompt: a 3-token verify, then one-token decode steps
FORWARDS = [(len(PROMPT), [40, 41, 42]), (len(PROMPT) + 3, [43]), (len(PROMPT) + 4, [44])]
TOL = {torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


def metadata(start: int, num_tokens: int):
    return build_metadata(positions=list(range(start, start + num_tokens)), num_query=[num_tokens],
                          seq_lens=[start + num_tokens], block_tables=[[3, 1, 4, 2, 5]], block_size=BLOCK_SIZE,
                          device=DEVICE)


@pytest.fixture
def gemv_calls(monkeypatch) -> list[int]:
    """The token count of each fused projection launch, negative for qkv with RoPE and the K/V store."""
    calls: list[int] = []

    def counting(real, sign):
        def counted(x, *args, **kwargs):
            calls.append(sign * x.shape[0])
            return real(x, *args, **kwargs)
        return counted

    monkeypatch.setattr(fused, "gemv", counting(fused.gemv, 1))
    monkeypatch.setattr(fused, "gemv_rope_store", counting(fused.gemv_rope_store, -1))
    return calls


@pytest.fixture
def qk_norm_calls(monkeypatch) -> list[int]:
    """The token count of each fused q/k norm + RoPE + K/V store launch (kernels/qk_norm_rope.py)."""
    calls: list[int] = []
    real = fused.qk_norm_rope_store

    def counted(qkv, *args, **kwargs):
        calls.append(qkv.shape[0])
        return real(qkv, *args, **kwargs)

    monkeypatch.setattr(fused, "qk_norm_rope_store", counted)
    return calls


def block_calls(num_tokens: int, head_dim: int, has_qk_norm: bool) -> list[int]:
    """`gemv_calls` of one decoder block: qkv (joined with RoPE and the store where its tiles hold 16 dims of a
    half-head, or at one token, and no q/k norm sits in between), o_proj, gate_up, down."""
    n = num_tokens
    is_rope_joined = not has_qk_norm and (n == 1 or head_dim // 2 >= 16)
    return [-n if is_rope_joined else n, n, n, n]


def assert_close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    tol = TOL[dtype]  # the model's dtype (logits come back fp32)
    scale = want.float().abs().max().item()
    torch.testing.assert_close(got.float(), want.float(), atol=tol * scale, rtol=tol, msg=what)


@runnable
@pytest.mark.parametrize("preset, head_dim, dtype", [
    ("tiny-llama", 16, torch.float32),  # 8 dims a half: RoPE and the K/V store join qkv at one token only
    ("tiny-llama", 32, torch.float16),  # ... and on the tensor-core tiles too
    ("tiny-qwen3", 16, torch.float16),  # q/k norm: one kernel after qkv normalizes, rotates and stores
    ("tiny-qwen2", 16, torch.float32),  # a dense block with a qkv bias: the eager chain (decode_gemv.applies)
], ids=str)
@pytest.mark.slow  # several seconds on 2 cores: the fast suite stays under 5 minutes
def test_decoder_forwards_match_the_torch_path(preset, head_dim, dtype, gemv_calls, qk_norm_calls):
    config = replace(get_preset(preset), num_hidden_layers=3, head_dim=head_dim)
    model = DecoderLM(config, create_backend("torch"), dtype=dtype, device=DEVICE)
    model.init_random_weights()
    randomize(model, seed=1)
    aux_ids = (0, 2, 3)
    runs = {}
    for policy in ("off", "on"):
        kv = KVCache(model.kv_cache_spec(), 6, BLOCK_SIZE, DEVICE)
        outputs = []
        fused.set_policy(model, policy)
        with torch.no_grad():
            for start, ids in [(0, PROMPT), *FORWARDS]:
                out = model(torch.tensor(ids, device=DEVICE), metadata(start, len(ids)), kv, aux_layer_ids=aux_ids)
                outputs.append((model.compute_logits(out.hidden_states), out.aux_hidden_states))
        runs[policy] = outputs, kv
    # The prefill (7 tokens) is a decode-sized batch here too; Qwen2's biased dense blocks keep the eager chain.
    expected, expected_qk = [], []
    for n in ([] if config.attention_bias else [len(ids) for _, ids in [(0, PROMPT), *FORWARDS]]):
        expected += block_calls(n, head_dim, config.use_qk_norm) * config.num_hidden_layers
        expected_qk += [n] * config.num_hidden_layers if config.use_qk_norm else []
    assert gemv_calls == expected
    assert qk_norm_calls == expected_qk
    for step, ((got_logits, got_aux), (want_logits, want_aux)) in enumerate(zip(runs["on"][0], runs["off"][0])):
        assert_close(got_logits, want_logits, dtype, f"logits, forward {step}")
        assert_close(got_aux, want_aux, dtype, f"aux states, forward {step}")
    for got, want in zip(runs["on"][1].k + runs["on"][1].v, runs["off"][1].k + runs["off"][1].v):
        assert_close(got, want, dtype, "K/V")


@runnable
@pytest.mark.parametrize("method, num_layers, norm_before_residual, first_layer_calls, dtype", [
    ("eagle3", 1, False, 1, torch.float32),  # EAGLE-3's first layer: qkv over the paired norms, o_proj, gate_up, down
    ("eagle3", 2, True, 1, torch.float16),
    ("eagle", 2, False, 1, torch.float16),  # EAGLE-1's first layer (identity input norm) takes the fused block too
], ids=str)
@pytest.mark.slow  # several seconds on 2 cores: the fast suite stays under 5 minutes
def test_eagle_head_draft_steps_match_the_torch_path(method, num_layers, norm_before_residual, first_layer_calls,
                                                     dtype, gemv_calls):
    head = random_eagle_head(method, num_layers, norm_before_residual, False, dtype, DEVICE)
    gen = torch.Generator().manual_seed(3)
    width = head.shape.fc_in_features if head.is_eagle3 else head.config.hidden_size
    features = torch.randn(len(PROMPT), width, generator=gen).to(DEVICE, dtype)
    fused.set_policy(head, "off")
    with torch.no_grad():
        kv = KVCache(head.kv_cache_spec(), 6, BLOCK_SIZE, DEVICE)
        out = head(torch.tensor(PROMPT, device=DEVICE), head.project_target_features(features), metadata(0, 7), kv,
                   "draft")
    results = {}
    for policy in ("off", "on"):
        step_kv, hidden = copy.deepcopy(kv), out.hidden[-1:]
        steps = []
        fused.set_policy(head, policy)
        with torch.no_grad():
            # Draft steps feed the head its own output; the 2-token one stands for a batch's draft step.
            for start, num_tokens in ((len(PROMPT), 1), (len(PROMPT) + 1, 2), (len(PROMPT) + 3, 1)):
                ids = torch.arange(60 + start, 60 + start + num_tokens, device=DEVICE)
                step = head(ids, hidden.expand(num_tokens, -1), metadata(start, num_tokens), step_kv, "draft")
                hidden = step.hidden[-1:]
                steps.append((step.hidden, head.compute_logits(step.logits_input)))
        results[policy] = steps, step_kv
    expected = []
    for n in (1, 2, 1):  # the first layer on the fused head (eagle/fused_head.py) launches as a block; later layers are blocks
        # EAGLE-1 feeds every step through its fc ([embedding, hidden] -> H) as a gemv first; EAGLE-3's fc reads target
        # features only
        fc = [n] if method == "eagle" else []
        first = fc + block_calls(n, head.config.layer.head_dim, False) if first_layer_calls else []
        expected += first + block_calls(n, head.config.layer.head_dim, False) * (num_layers - 1)
    assert gemv_calls == expected
    for i, ((got_h, got_l), (want_h, want_l)) in enumerate(zip(results["on"][0], results["off"][0])):
        assert_close(got_h, want_h, dtype, f"hidden, step {i}")
        assert_close(got_l, want_l, dtype, f"logits, step {i}")
    for got, want in zip(results["on"][1].k + results["on"][1].v, results["off"][1].k + results["off"][1].v):
        assert_close(got, want, dtype, "K/V")


def test_more_tokens_take_the_eager_chain():
    # Past 64 tokens (the kernel's bound) a forward is a prefill: cuBLAS's GEMMs.
    model = DecoderLM(replace(get_preset("tiny-llama"), num_hidden_layers=1), create_backend("torch"),
                      dtype=torch.float32, device=DEVICE)
    layer = model.layers[0]
    x = torch.zeros(65, model.config.hidden_size, device=DEVICE)
    fused.set_policy(model, "on" if kernels_runnable_here() else "off")
    assert not decode_gemv.applies(layer, x)
    assert not decode_gemv.applies(layer, x[:0])
    assert decode_gemv.applies(layer, x[:64]) == kernels_runnable_here()
    fused.set_policy(model, "off")
    assert not decode_gemv.applies(layer, x[:1])


@pytest.mark.skipif(kernels_runnable_here(), reason="the interpreted tests run in this process")
def test_interpreted_tests_pass_in_a_fresh_process():
    assert_passes_interpreted(__file__)

