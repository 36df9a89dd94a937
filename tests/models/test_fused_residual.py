"""The MLP residual add moved into the next norm (layers pass (hidden, residual)) changes nothing: DecoderLM and EAGLE
heads == the plain block structure (h = h + mlp(norm(h)), then norm) built from the same submodules, bit for bit on the
torch path and on the fused path wherever the kernels' add rounds like torch's (all but bf16 on the CPU interpreter)."""

from __future__ import annotations

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
from specbench.speculation.drafters.eagle import fused_head  # noqa: E402
from specbench.speculation.drafters.eagle.head import EagleHead  # noqa: E402

RERUN_REASON = "triton was imported before TRITON_INTERPRET=1; test_interpreted_tests_pass_in_a_fresh_process"
runnable = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
BLOCK_SIZE = 4
PROMPTS = ([5, 9, 11, 3, 7], [4, 8, 100, 12, 13, 14, 15, 16, 3])
# (policy, dtype): fp32 fused adds are trivially torch's; fp16 rounds like torch in the interpreter too.
CASES = [("off", torch.float32), ("off", torch.bfloat16), ("on", torch.float16), ("on", torch.bfloat16)]


def prefill_metadata():
    tables = [[1 + 4 * r + i for i in range(4)] for r in range(len(PROMPTS))]
    return build_metadata(positions=[j for p in PROMPTS for j in range(len(p))], num_query=[len(p) for p in PROMPTS],
                          seq_lens=[len(p) for p in PROMPTS], block_tables=tables, block_size=BLOCK_SIZE, device=DEVICE)


def plain_blocks(layers, hidden, cos_sin, kv, md, backend) -> list[torch.Tensor]:
    """The residual stream entering each layer, then after the last: every add a torch add."""
    streams = [hidden]
    for layer in layers:
        attn_out = layer.self_attn(layer.input_layernorm(hidden), cos_sin, kv, md, backend)
        normed, summed = layer.post_attention_layernorm.add_and_norm(attn_out, hidden)
        hidden = summed + layer.mlp(normed)
        streams.append(hidden)
    return streams


def is_exact(dtype: torch.dtype) -> bool:
    return dtype != torch.bfloat16 or DEVICE.type == "cuda"  # the interpreter truncates fp32 -> bf16


def assert_same(got: torch.Tensor, want: torch.Tensor, exact: bool) -> None:
    if exact:
        assert torch.equal(got, want)
    else:
        torch.testing.assert_close(got, want, atol=0.05 * want.abs().max().item(), rtol=0.05)


@pytest.fixture
def residual_norms(monkeypatch) -> list[int]:
    """Appends 1 for each fused norm launched with a residual to add, 0 for each without. The blocks take the
    layers' own chain: decode batches would take decode_gemv's (tests/models/test_decode_gemv.py)."""
    monkeypatch.setattr(decode_gemv, "applies", lambda layer, x: False)
    calls: list[int] = []
    module = fused._kernel_modules().rms_norm
    real = module.rms_norm

    def counted(x, weight, eps, residual=None, **kwargs):
        calls.append(int(residual is not None))
        return real(x, weight, eps, residual, **kwargs)

    monkeypatch.setattr(module, "rms_norm", counted)
    return calls


@runnable
@pytest.mark.parametrize("policy, dtype", CASES)
@pytest.mark.parametrize("preset", ["tiny-llama", "tiny-qwen3"])
def test_decoder_matches_plain_blocks(preset, policy, dtype, residual_norms):
    config = replace(get_preset(preset), num_hidden_layers=3)
    model = DecoderLM(config, create_backend("torch"), dtype=dtype, device=DEVICE)
    model.init_random_weights()
    randomize(model, seed=1)
    ids = torch.tensor([t for p in PROMPTS for t in p], device=DEVICE)
    aux_ids = (3, 0, 2, 1)
    fused.set_policy(model, policy)
    with torch.no_grad():
        got_kv, want_kv = (KVCache(model.kv_cache_spec(), 20, BLOCK_SIZE, DEVICE) for _ in range(2))
        got = model(ids, prefill_metadata(), got_kv, aux_layer_ids=aux_ids)
        num_fused_norms = len(residual_norms)
        md = prefill_metadata()
        cos_sin = model.rotary.cos_sin(md.positions, md.max_seq_len)
        streams = plain_blocks(model.layers, model.embed(ids), cos_sin, want_kv, md, model.attn_backend)
        want_hidden = model.norm(streams[-1])
    exact = policy == "off" or is_exact(dtype)
    assert_same(got.hidden_states, want_hidden, exact)
    assert_same(got.aux_hidden_states, torch.cat([streams[i] for i in aux_ids], dim=-1), exact)
    for got_cache, want_cache in zip(got_kv.k + got_kv.v, want_kv.k + want_kv.v):
        assert_same(got_cache, want_cache, exact)
    if policy == "on":  # every residual add rides on a norm: 2 per layer (the first layer's input add excepted) + 1
        norms = residual_norms[:num_fused_norms]
        assert sum(norms) == 2 * config.num_hidden_layers
        assert len(norms) - sum(norms) == 1 + (2 * config.num_hidden_layers if config.use_qk_norm else 0)


def plain_head(head: EagleHead, ids, hidden, md, kv) -> tuple[torch.Tensor, torch.Tensor]:
    """(hidden, logits_input) of the head's plain block structure."""
    cos_sin = head.rotary.cos_sin(md.positions, md.max_seq_len)
    embeds = head.embed_tokens(ids)
    layers = head.layers
    if head.is_eagle3:
        first = layers[0]
        normed = first.hidden_norm(hidden)
        h = (normed if first.norm_before_residual else hidden) + first.self_attn(
            torch.cat([first.input_layernorm(embeds), normed], dim=-1), cos_sin, kv, md, head.attn_backend)
        h, layers = h + first.mlp(first.post_attention_layernorm(h)), layers[1:]
    else:
        h = head.fc(torch.cat([embeds, hidden], dim=-1))
    h = plain_blocks(layers, h, cos_sin, kv, md, head.attn_backend)[-1]
    if not head.is_eagle3:
        return h, h
    normed = head.norm(h)
    return (normed if head.config.norm_output else h), normed


@runnable
@pytest.mark.parametrize("policy, dtype", CASES)
@pytest.mark.parametrize("method, norm_before_residual, norm_output", [
    ("eagle", False, False), ("eagle3", False, False), ("eagle3", True, True)])
@pytest.mark.parametrize("num_layers", [1, 2])
def test_eagle_head_matches_plain_blocks(method, norm_before_residual, norm_output, num_layers, policy, dtype,
                                        monkeypatch):
    monkeypatch.setattr(decode_gemv, "applies", lambda layer, x: False)  # as residual_norms says
    # fc as a torch projection too: the gemv head input is tests/eagle/test_eagle_fused_head.py's
    monkeypatch.setattr(fused_head, "projects", lambda policy, linear, x: False)
    if not (policy == "off" or is_exact(dtype)):
        pytest.skip("the CPU interpreter rounds bf16 sums by truncation; covered on CUDA")
    head = random_eagle_head(method, num_layers, norm_before_residual, norm_output, dtype, DEVICE)
    ids = torch.tensor([t for p in PROMPTS for t in p], device=DEVICE)
    gen = torch.Generator().manual_seed(3)
    features = torch.randn(len(ids), head.shape.fc_in_features if head.is_eagle3 else head.config.hidden_size,
                           generator=gen).to(DEVICE, dtype)
    fused.set_policy(head, policy)
    with torch.no_grad():
        hidden = head.project_target_features(features)
        got_kv, want_kv = (KVCache(head.kv_cache_spec(), 20, BLOCK_SIZE, DEVICE) for _ in range(2))
        got = head(ids, hidden, prefill_metadata(), got_kv, "draft")
        want_hidden, want_logits_input = plain_head(head, ids, hidden, prefill_metadata(), want_kv)
    assert torch.equal(got.hidden, want_hidden) and torch.equal(got.logits_input, want_logits_input)


@pytest.mark.skipif(kernels_runnable_here(), reason="the interpreted tests run in this process")
def test_interpreted_tests_pass_in_a_fresh_process():
    assert_passes_interpreted(__file__)
