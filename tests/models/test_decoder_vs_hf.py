"""Our DecoderLM over the paged KV cache reproduces the transformers model on the same weights."""

from __future__ import annotations

import pytest
import torch
from tests.support.tiny_models import build_tiny_model, gsm8k_questions, load_tiny_tokenizer

from specbench.attention import build_metadata
from specbench.kv.kv_cache import KVCache
from specbench.models import DecoderLM
from specbench.models.loader import load_model

BLOCK_SIZE = 4
NUM_BLOCKS = 64
TOL = 1e-4
CPU = torch.device("cpu")

VARIANTS = {
    "llama": dict(arch="llama"),
    "llama-tied": dict(arch="llama", tie=True),
    "llama-bias": dict(arch="llama", attention_bias=True),
    "llama3-rope": dict(arch="llama", rope_theta=10000.0, rope_scaling={
        # Short original context so the high / interpolated / scaled bands all occur at head_dim 16.
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 256}),
    "linear-rope": dict(arch="llama", rope_scaling={"rope_type": "linear", "factor": 2.0}),
    "qwen2": dict(arch="qwen2"),
    "qwen3": dict(arch="qwen3"),
    "qwen3-tied": dict(arch="qwen3", tie=True),
}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def pair(request, tmp_path_factory):
    """(HF model, our model), same fp32 weights, loaded through our loader."""
    out = tmp_path_factory.mktemp(request.param)
    kwargs = dict(VARIANTS[request.param])
    hf = build_tiny_model(out, kwargs.pop("arch"), num_layers=3, **kwargs)
    ours = load_model(str(out), dtype=torch.float32, device=CPU, attn_backend="torch").model
    return hf, ours


@pytest.fixture(scope="module")
def texts() -> list[list[int]]:
    tok = load_tiny_tokenizer()
    return [tok(q)["input_ids"][:n] for q, n in zip(gsm8k_questions("test")[:3], (23, 17, 30), strict=True)]


def hf_logits_and_hidden(hf, ids: list[int]) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_hidden_states=True)
    return out.logits[0], tuple(h[0] for h in out.hidden_states)


def run(model: DecoderLM, kv: KVCache, chunks, aux_layer_ids=()):
    """One forward over several requests; chunk = (new token ids, tokens already cached, block table)."""
    ids, positions, num_query, seq_lens, tables = [], [], [], [], []
    for tokens, num_cached, blocks in chunks:
        ids += tokens
        positions += range(num_cached, num_cached + len(tokens))
        num_query.append(len(tokens))
        seq_lens.append(num_cached + len(tokens))
        tables.append(blocks)
    device = _device_of(model)
    md = build_metadata(positions=positions, num_query=num_query, seq_lens=seq_lens, block_tables=tables,
                        block_size=BLOCK_SIZE, device=device)
    with torch.no_grad():
        out = model(torch.tensor(ids, device=device), md, kv, aux_layer_ids=aux_layer_ids)
        return model.compute_logits(out.hidden_states), out


def new_cache(model: DecoderLM) -> KVCache:
    return KVCache(model.kv_cache_spec(), NUM_BLOCKS, BLOCK_SIZE, _device_of(model))


def _device_of(model: DecoderLM) -> torch.device:
    # the models under test are CPU ones, but the Triton-backend variants run on CUDA where a GPU is present
    return next(model.parameters()).device


def blocks_for(num_tokens: int, start: int) -> list[int]:
    # Descending, non-contiguous ids: a layout bug cannot hide behind the identity mapping.
    return [start - 3 * i for i in range((num_tokens + BLOCK_SIZE - 1) // BLOCK_SIZE)]


def test_prefill_logits_match_hf(pair, texts):
    hf, ours = pair
    for ids in texts:
        ref, _ = hf_logits_and_hidden(hf, ids)
        logits, _ = run(ours, new_cache(ours), [(ids, 0, blocks_for(len(ids), 60))])
        assert logits.dtype == torch.float32
        assert (logits - ref).abs().max().item() < TOL


def test_decode_through_paged_cache_matches_full_forward(pair, texts):
    hf, ours = pair
    ids = texts[2]
    ref, _ = hf_logits_and_hidden(hf, ids)
    kv, blocks, prefix = new_cache(ours), blocks_for(len(ids), 61), 9
    logits, _ = run(ours, kv, [(ids[:prefix], 0, blocks)])
    assert (logits - ref[:prefix]).abs().max().item() < TOL
    for t in range(prefix, len(ids)):
        logits, _ = run(ours, kv, [([ids[t]], t, blocks)])
        assert (logits[0] - ref[t]).abs().max().item() < TOL, f"decode step at position {t}"


def test_aux_hidden_states_follow_hf_indices(pair, texts):
    hf, ours = pair
    ids = texts[0]
    _, hf_hidden = hf_logits_and_hidden(hf, ids)
    num_layers = ours.config.num_hidden_layers
    aux_ids = (2, 0, 1)  # out of order on purpose: the concatenation follows the request
    _, out = run(ours, new_cache(ours), [(ids, 0, blocks_for(len(ids), 60))], aux_layer_ids=aux_ids)
    hidden = ours.config.hidden_size
    assert out.aux_hidden_states.shape == (len(ids), len(aux_ids) * hidden)
    for slot, layer in enumerate(aux_ids):
        got = out.aux_hidden_states[:, slot * hidden:(slot + 1) * hidden]
        assert (got - hf_hidden[layer]).abs().max().item() < TOL
    # Index num_layers is the last layer's output before the final norm (HF reports it after the norm).
    _, last = run(ours, new_cache(ours), [(ids, 0, blocks_for(len(ids), 60))], aux_layer_ids=(num_layers,))
    assert torch.allclose(ours.norm(last.aux_hidden_states), last.hidden_states)
    assert (last.hidden_states - hf_hidden[num_layers]).abs().max().item() < TOL


def test_batched_requests_equal_each_alone(pair, texts):
    hf, ours = pair
    a, b = texts[0], texts[1]
    ref_a, _ = hf_logits_and_hidden(hf, a)
    ref_b, _ = hf_logits_and_hidden(hf, b)
    kv = new_cache(ours)
    blocks_a, blocks_b = blocks_for(len(a), 60), blocks_for(len(b), 59)
    # Step 1: both prefill together (all but the last token of a).
    logits, _ = run(ours, kv, [(a[:-1], 0, blocks_a), (b, 0, blocks_b)])
    n = len(a) - 1
    assert (logits[:n] - ref_a[:n]).abs().max().item() < TOL
    assert (logits[n:] - ref_b).abs().max().item() < TOL
    # Step 2: a decodes its last token while a fresh request (b again, new blocks) prefills.
    logits, _ = run(ours, kv, [([a[-1]], n, blocks_a), (b[:7], 0, blocks_for(7, 58))])
    assert (logits[0] - ref_a[-1]).abs().max().item() < TOL
    assert (logits[1:] - ref_b[:7]).abs().max().item() < TOL


def test_bf16_tracks_fp32(tiny_model_dir, texts):
    fp32 = load_model(str(tiny_model_dir), dtype=torch.float32, device=CPU, attn_backend="torch").model
    bf16 = load_model(str(tiny_model_dir), dtype="bf16", device=CPU, attn_backend="torch").model
    assert bf16.embed_weight.dtype == torch.bfloat16 and bf16.kv_cache_spec().dtype == torch.bfloat16
    ids = texts[2]
    ref, _ = run(fp32, new_cache(fp32), [(ids, 0, blocks_for(len(ids), 60))])
    got, _ = run(bf16, new_cache(bf16), [(ids, 0, blocks_for(len(ids), 60))])
    assert torch.isfinite(got).all()
    assert (got.argmax(-1) == ref.argmax(-1)).float().mean().item() >= 0.9
