"""The tiny test checkpoints behave like small LMs: peaky next-token distributions, realistic drafts."""

from __future__ import annotations

import pytest
import torch
from tests.support.tiny_models import derive_draft, gsm8k_questions, tiny_tokenizer_dir

from specbench.attention import build_metadata
from specbench.kv.kv_cache import KVCache
from specbench.models import load_model

CPU = torch.device("cpu")
NUM_CONTEXTS, CONTEXT_LEN = 12, 40


def load(path):
    return load_model(str(path), dtype=torch.float32, device=CPU, attn_backend="torch")


def logits_on_text(loaded) -> torch.Tensor:  # [NUM_CONTEXTS * CONTEXT_LEN, vocab]
    """Next-token logits at every position of real questions, all requests in one batched forward."""
    encoded = (loaded.tokenizer(q)["input_ids"] for q in gsm8k_questions("test"))
    prompts = [ids[:CONTEXT_LEN] for ids in encoded if len(ids) >= CONTEXT_LEN][:NUM_CONTEXTS]
    blocks_per_req = CONTEXT_LEN // 4
    model = loaded.model
    kv = KVCache(model.kv_cache_spec(), NUM_CONTEXTS * blocks_per_req, 4, CPU)
    md = build_metadata(
        positions=list(range(CONTEXT_LEN)) * NUM_CONTEXTS, num_query=[CONTEXT_LEN] * NUM_CONTEXTS,
        seq_lens=[CONTEXT_LEN] * NUM_CONTEXTS,
        block_tables=[list(range(r, NUM_CONTEXTS * blocks_per_req, NUM_CONTEXTS)) for r in range(NUM_CONTEXTS)],
        block_size=4, device=CPU)
    with torch.no_grad():
        return model.compute_logits(model(torch.tensor(sum(prompts, [])), md, kv).hidden_states)


@pytest.fixture(scope="module")
def target_logits(tiny_model_dir):
    return logits_on_text(load(tiny_model_dir))


def test_next_token_distributions_are_peaky_and_context_dependent(target_logits):
    top2 = target_logits.topk(2, dim=-1).values
    margins = top2[:, 0] - top2[:, 1]
    top1_prob = target_logits.softmax(-1).max(-1).values
    assert (margins < 1e-3).float().mean() < 0.02  # greedy is well defined
    assert top1_prob.median() > 0.15  # far from uniform (1 / 1024)
    assert target_logits.argmax(-1).unique().numel() > 0.2 * len(target_logits)  # not one token everywhere


def test_derived_draft_agrees_realistically(tiny_model_dir, tiny_draft_dir, target_logits, tmp_path):
    target_greedy = target_logits.argmax(-1)
    agreement = (logits_on_text(load(tiny_draft_dir)).argmax(-1) == target_greedy).float().mean().item()
    assert 0.5 <= agreement <= 0.95
    noisier = derive_draft(tiny_model_dir, tmp_path / "noisy", noise=0.4, seed=1)
    noisy_agreement = (logits_on_text(load(noisier)).argmax(-1) == target_greedy).float().mean().item()
    assert noisy_agreement < agreement - 0.1


def test_truncated_draft_loads_with_fewer_layers(tiny_model_dir, tmp_path):
    from tests.support.tiny_models import build_tiny_model

    target_dir = tmp_path / "target4"
    build_tiny_model(target_dir, "qwen3", num_layers=4)
    draft = load(derive_draft(target_dir, tmp_path / "draft2", noise=0.05, num_layers=2))
    assert draft.config.num_hidden_layers == 2 and draft.config.use_qk_norm
    assert torch.isfinite(logits_on_text(draft)).all()


def test_tokenizer_is_trained_once():
    first = tiny_tokenizer_dir()
    stamp = (first / "tokenizer.json").stat().st_mtime_ns
    assert tiny_tokenizer_dir() == first and (first / "tokenizer.json").stat().st_mtime_ns == stamp
