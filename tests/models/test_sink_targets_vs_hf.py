"""gpt-oss, Gemma-2 and Gemma-3 DecoderLMs over the paged KV cache reproduce transformers' models on the same fp32 weights:
prefill logits (final soft-cap included), one-token decode through the cache past the window, and the aux hidden
states (HF `hidden_states` indices; Gemma's index 0 is the scaled embedding); the Triton paged-attention kernels
(interpreted on CPU) with the sinks, the window, Gemma's scale and Gemma-2's soft-cap agree too."""

from __future__ import annotations

import pytest
import torch

from specbench.models.loader import load_model
from tests.models.test_decoder_vs_hf import (
    blocks_for,
    hf_logits_and_hidden,
    new_cache,
    run,
)
from tests.support.hf_greedy import tiny_prompt_ids
from tests.support.kernel_testing import kernels_runnable_here
from tests.support.sink_models import build_sink_target

TOL = 1e-4
CPU = torch.device("cpu")


@pytest.fixture(scope="module", params=["gpt_oss", "gemma2", "gemma3"])
def pair(request, tmp_path_factory):
    from transformers import AutoModelForCausalLM

    target, _ = build_sink_target(tmp_path_factory.mktemp("vs-hf"), request.param)
    hf = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).eval()
    return hf, target


def _ours(target, backend: str = "torch"):
    # Triton kernels run on CUDA where there is a GPU, else under the interpreter on CPU
    device = torch.device("cuda") if backend == "triton" and torch.cuda.is_available() else CPU
    return load_model(str(target), dtype=torch.float32, device=device, attn_backend=backend).model


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_prefill_and_decode_logits_match_hf(pair, backend):
    if backend == "triton" and not kernels_runnable_here():
        pytest.skip("Triton kernels need CUDA or the interpreter (TRITON_INTERPRET=1 before triton's import)")
    hf, target = pair
    ours = _ours(target, backend)
    ids = tiny_prompt_ids()[1]  # 33 tokens: far past the window of 5
    ref, _ = hf_logits_and_hidden(hf, ids)
    logits, _ = run(ours, new_cache(ours), [(ids, 0, blocks_for(len(ids), 60))])
    assert (logits.cpu() - ref).abs().max().item() < TOL
    kv, blocks, prefix = new_cache(ours), blocks_for(len(ids), 61), 7
    run(ours, kv, [(ids[:prefix], 0, blocks)])
    for t in range(prefix, len(ids)):
        logits, _ = run(ours, kv, [([ids[t]], t, blocks)])
        assert (logits[0].cpu() - ref[t]).abs().max().item() < TOL, f"decode step at position {t}"


def test_aux_hidden_states_follow_hf_indices(pair):
    hf, target = pair
    ours = _ours(target)
    ids = tiny_prompt_ids()[2]
    _, hf_hidden = hf_logits_and_hidden(hf, ids)
    num_layers = ours.config.num_hidden_layers
    aux_ids = tuple(range(num_layers))
    _, out = run(ours, new_cache(ours), [(ids, 0, blocks_for(len(ids), 60))], aux_layer_ids=aux_ids)
    h = ours.config.hidden_size
    for slot, layer in enumerate(aux_ids):
        got = out.aux_hidden_states[:, slot * h:(slot + 1) * h]
        assert (got - hf_hidden[layer]).abs().max().item() < TOL, f"hidden_states[{layer}]"
    assert (out.hidden_states - hf_hidden[num_layers]).abs().max().item() < TOL


def test_sinks_and_scale_are_load_bearing(pair):
    """Guard: without the sinks (gpt-oss), the cap (Gemma-2) or with the default scale (Gemma) the logits move far past
    TOL, so the identities above test them."""
    hf, target = pair
    ours = _ours(target)
    ids = tiny_prompt_ids()[0]
    ref, _ = hf_logits_and_hidden(hf, ids)
    for layer in ours.layers:
        if layer.self_attn.sinks is not None:
            layer.self_attn.sinks.fill_(-1e4)
        layer.self_attn.scale = layer.self_attn.softcap = None
    logits, _ = run(ours, new_cache(ours), [(ids, 0, blocks_for(len(ids), 60))])
    assert (logits - ref).abs().max().item() > 100 * TOL
