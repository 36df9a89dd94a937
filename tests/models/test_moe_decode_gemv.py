"""MoE decoder layers (and biased projections) on the fused decode path (models/decode_gemv.py) == the torch path:
the attention half as gemv projections with the biases in their epilogues (RoPE and the K/V store in qkv's, or
Qwen3's q/k norm + RoPE + store as one kernel after it), then the MoE forward. Tiny Qwen3-MoE, gpt-oss (sliding
window shorter than the prompt, sinks, q/k/v/o biases) and GLM-4.5 (partial RoPE, sigmoid routing, shared expert)
shapes; logits, aux states and the K/V written, over a 7-token prefill, a 3-token verify and one-token steps."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

pytest.importorskip("triton")

from tests.support.head_modules import randomize  # noqa: E402
from tests.support.interpreted import assert_passes_interpreted  # noqa: E402
from tests.support.kernel_testing import kernels_runnable_here  # noqa: E402

from specbench.attention import build_metadata, create_backend  # noqa: E402
from specbench.attention.kinds import FullAttention, SlidingWindowAttention  # noqa: E402
from specbench.execution_paths import PATH_NAMES  # noqa: E402
from specbench.kv.kv_cache import KVCache  # noqa: E402
from specbench.models import DecoderLM, decode_gemv, get_preset  # noqa: E402
from specbench.models import fused_kernels as fused  # noqa: E402
from specbench.models import llama  # noqa: E402
from specbench.models.moe import MoeMLP  # noqa: E402
from specbench.models.moe_config import MoeConfig  # noqa: E402

RERUN_REASON = "triton was imported before TRITON_INTERPRET=1; test_interpreted_tests_pass_in_a_fresh_process"
runnable = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
BLOCK_SIZE = 4
PROMPT = [5, 9, 11, 3, 7, 21, 2]
FORWARDS = [(len(PROMPT), [40, 41, 42]), (len(PROMPT) + 3, [43]), (len(PROMPT) + 4, [44])]
TOL = {torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}
_TINY = {"vocab_size": 1024, "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 2048,
         "tie_word_embeddings": False, "num_mtp_modules": 0}


def tiny_config(name: str, head_dim: int):
    if name == "qwen3-moe":
        return replace(get_preset("tiny-qwen3-moe"), head_dim=head_dim)
    if name == "gpt-oss":
        return replace(get_preset("gpt-oss-20b"), **{**_TINY, "head_dim": head_dim}, moe_layer_ids=(0, 1),
                       moe=MoeConfig(64, 4, 2, 32, scoring="topk_softmax", norm_topk_prob=False,
                                     has_router_bias=True, has_expert_bias=True, activation="swiglu_oai"),
                       attention_kinds=(SlidingWindowAttention(5), FullAttention()))
    return replace(get_preset("glm-4.5-air"), **{**_TINY, "head_dim": head_dim}, rotary_dim=head_dim // 2,
                   moe_layer_ids=(1,), moe=MoeConfig(64, 8, 2, 32, scoring="sigmoid", norm_topk_prob=True,
                                                     has_score_correction_bias=True, routed_scaling_factor=2.5,
                                                     shared_intermediate_size=32))


def metadata(start: int, num_tokens: int):
    return build_metadata(positions=list(range(start, start + num_tokens)), num_query=[num_tokens],
                          seq_lens=[start + num_tokens], block_tables=[[3, 1, 4, 2, 5]], block_size=BLOCK_SIZE,
                          device=DEVICE)


def assert_close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    tol = TOL[dtype]
    scale = want.float().abs().max().item()
    torch.testing.assert_close(got.float(), want.float(), atol=tol * scale, rtol=tol, msg=what)


@runnable
@pytest.mark.parametrize("name, head_dim, dtype", [
    ("qwen3-moe", 16, torch.float32),  # q/k norm + RoPE + store as one kernel after qkv
    ("gpt-oss", 16, torch.float32),  # biases, sinks, window 5; RoPE and the store join qkv at one token
    ("gpt-oss", 32, torch.float16),  # ... and on the tensor-core tiles too
    ("glm", 32, torch.float32),  # biases, partial RoPE, a dense first layer then a MoE layer
], ids=str)
@pytest.mark.slow
@torch.no_grad()
def test_moe_decoders_match_the_torch_path(name, head_dim, dtype, monkeypatch):
    config = tiny_config(name, head_dim)
    model = DecoderLM(config, create_backend("torch", check_invariants=True), dtype=dtype, device=DEVICE)
    model.init_random_weights()
    randomize(model, seed=1)
    for m in model.modules():
        if isinstance(m, MoeMLP) and m.score_correction_bias is not None:
            m.score_correction_bias.normal_(std=0.1)
    blocks = []
    real_block = decode_gemv.block
    monkeypatch.setattr(decode_gemv, "block", lambda layer, hidden, *a: blocks.append(hidden.shape[0]) or real_block(
        layer, hidden, *a))
    score_checks = []  # INV-SCORE (debug invariants) recomputes the sink layers' attention on the fused path too
    real_check = decode_gemv.check_score_params
    for module in (decode_gemv, llama):  # the stored-K/V paths' check, and SelfAttention.attend's
        monkeypatch.setattr(module, "check_score_params", lambda *a: score_checks.append(a[0]) or real_check(*a))
    aux_ids = (0, 1, 2)
    runs = {}
    for policy in ("off", "on"):
        kv = KVCache(model.kv_cache_spec(), 6, BLOCK_SIZE, DEVICE)
        outputs = []
        fused.set_policy(model, policy)
        score_checks.clear()
        for start, ids in [(0, PROMPT), *FORWARDS]:
            out = model(torch.tensor(ids, device=DEVICE), metadata(start, len(ids)), kv, aux_layer_ids=aux_ids)
            outputs.append((model.compute_logits(out.hidden_states), out.aux_hidden_states))
        runs[policy] = outputs, kv
    # Every MoE block of every forward took the fused path under "on" (the prefill's 7 tokens are a decode batch
    # here); GLM's dense first block has q/k/v biases, so it keeps the eager chain (decode_gemv.applies).
    num_fused = len(config.moe_layer_ids) if config.attention_bias else config.num_hidden_layers
    assert blocks == [n for _, ids in [(0, PROMPT), *FORWARDS] for n in [len(ids)] * num_fused]
    assert len(score_checks) == (len(blocks) if config.has_attention_sinks else 0)
    for step, ((got_logits, got_aux), (want_logits, want_aux)) in enumerate(zip(runs["on"][0], runs["off"][0])):
        assert_close(got_logits, want_logits, dtype, f"logits, forward {step}")
        assert_close(got_aux, want_aux, dtype, f"aux states, forward {step}")
    for got, want in zip(runs["on"][1].k + runs["on"][1].v, runs["off"][1].k + runs["off"][1].v):
        assert_close(got, want, dtype, "K/V")


@runnable
def test_moe_layers_declare_the_proj_paths():
    # The attention half's path is recorded as for dense blocks: proj.rope_store where qkv rotates and stores, else
    # proj.fused (Qwen3's q/k norm: the one-kernel norm + RoPE + store after qkv).
    paths = {}
    for name in ("qwen3-moe", "gpt-oss"):
        model = DecoderLM(tiny_config(name, 32), create_backend("torch"), dtype=torch.float32, device=DEVICE)
        fused.set_policy(model, "on")
        x = torch.zeros(4, 64, device=DEVICE)
        assert all(decode_gemv.applies(layer, x) for layer in model.layers)
        paths[name] = {decode_gemv.fused_path(layer, 4) for layer in model.layers}
        fused.set_policy(model, "off")
        assert not any(decode_gemv.applies(layer, x) for layer in model.layers)
    assert paths == {"qwen3-moe": {"proj.fused"}, "gpt-oss": {"proj.rope_store"}}
    assert paths["qwen3-moe"] | paths["gpt-oss"] <= PATH_NAMES


@pytest.mark.skipif(kernels_runnable_here(), reason="the interpreted tests run in this process")
def test_interpreted_tests_pass_in_a_fresh_process():
    assert_passes_interpreted(__file__)
