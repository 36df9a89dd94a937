"""The MTP module against transformers' own MtpModel (transformers 5, `generate(use_mtp=True)`'s drafter) on a tiny
GLM-4.5-style MoE target whose MTP layer ships as `model.layers.{L}.*`: the target hidden state it is fed (the final
normed one, HF's hidden_states[-1]), the embedding-first concatenation, the MoE decoder layer with partial RoPE, the
final norm and the chaining of its own normed output all agree, step 1 and step 2, to fp32 rounding."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from specbench import LLM
from specbench.check.eagle_oracle import recompute_eagle_logits
from specbench.check.target_features import recompute_target_features
from specbench.selftest.tiny_mtp import LAYER_INDEX, build_mtp_target
from tests.support.tiny_models import build_tiny_model

GLM = {"n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "n_shared_experts": 1,
       "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "routed_scaling_factor": 2.5,
       "attention_bias": True, "use_qk_norm": True, "rope_scaling": {"partial_rotary_factor": 0.5}}
NUM_LAYERS, NUM_EXPERTS = 2, 8
TOKENS = (5, 17, 99, 3, 42, 250, 7, 8, 123, 77, 31)


def _hf_mtp_state(target: str) -> dict[str, torch.Tensor]:
    """The checkpoint's MTP layer under MtpModel's parameter names (experts stacked as transformers 5 holds them)."""
    prefix, state = f"model.layers.{NUM_LAYERS}.", {}
    for name, tensor in load_file(Path(target) / "model.safetensors").items():
        if not name.startswith(prefix):
            continue
        rest = name.removeprefix(prefix)
        if rest in ("enorm.weight", "hnorm.weight", "eh_proj.weight"):
            state[f"layers.0.{rest}"] = tensor
        elif rest == "shared_head.norm.weight":
            state["layers.0.post_norm.weight"] = tensor
        else:
            state[f"layers.0.mtp_block.{rest}"] = tensor
    experts = "layers.0.mtp_block.mlp.experts."
    state[experts + "gate_up_proj"] = torch.stack([
        torch.cat([state.pop(f"{experts}{e}.gate_proj.weight"), state.pop(f"{experts}{e}.up_proj.weight")])
        for e in range(NUM_EXPERTS)])
    state[experts + "down_proj"] = torch.stack([state.pop(f"{experts}{e}.down_proj.weight")
                                                for e in range(NUM_EXPERTS)])
    return state


@pytest.fixture(scope="module")
def hf_and_target(tmp_path_factory):
    from transformers.modeling_layers import MtpModel

    root = tmp_path_factory.mktemp("mtp_vs_hf")
    model = build_tiny_model(root / "base", "glm4_moe", seed=0, **GLM)
    with torch.no_grad():  # a bias that changes which experts win (the MTP layer copies layer 1's)
        model.model.layers[1].mlp.gate.e_score_correction_bias.copy_(0.1 * torch.randn(NUM_EXPERTS))
    model.save_pretrained(root / "base")
    target = build_mtp_target(root / "base", root / "target", LAYER_INDEX)
    model.config.num_mtp_layers = 1
    mtp = MtpModel(model, 1).eval()
    missing, unexpected = mtp.load_state_dict(_hf_mtp_state(target), strict=False)
    assert set(missing) == {"embed_tokens.weight", "shared_head.weight"} and not unexpected  # the target's, shared
    return model, mtp, target


@torch.no_grad()
def test_mtp_steps_match_transformers(hf_and_target):
    model, mtp, target = hf_and_target
    ids, n = torch.tensor([TOKENS]), len(TOKENS)
    target_hidden = model(ids, output_hidden_states=True).hidden_states[-1]  # [1, n, H] after the final norm
    positions = torch.arange(n)[None]
    step1 = mtp.forward_layer(0, target_hidden[:, :-1], positions[:, :-1], None, input_ids=ids[:, 1:])  # [1, n-1, H]
    hf_step1 = mtp._project_to_logits(step1)[0]  # [n - 1, vocab]: row p predicts token p + 2
    draft = hf_step1[-1].argmax()
    # Step 2 at position n - 1: (draft 1, the module's own output at n - 2), attending to the rows before it.
    chained = torch.cat([target_hidden[:, :-1], step1[:, -1:]], dim=1)
    step2 = mtp.forward_layer(0, chained, positions, None, input_ids=torch.cat([ids[:, 1:], draft.view(1, 1)], 1))
    hf_step2 = mtp._project_to_logits(step2)[0, -1]

    llm = LLM(target, dtype="fp32", device="cpu", method="mtp", max_num_steps=2, kv_cache_gb=0.02, block_size=4)
    proposer = llm.engine.proposer
    features = recompute_target_features(llm.engine.runner.model, proposer.target_feature_layers, TOKENS, 4, "cpu")
    assert torch.allclose(features, target_hidden[0], atol=1e-5)
    for m in range(3, n + 1):  # every prefix's step 1
        ours = recompute_eagle_logits(proposer, TOKENS[:m], 1, features)[0]
        assert torch.allclose(ours, hf_step1[m - 2], atol=1e-4), m
    ours = recompute_eagle_logits(proposer, (*TOKENS, int(draft)), 2, features)
    assert torch.allclose(ours[0], hf_step1[-1], atol=1e-4)
    assert torch.allclose(ours[1], hf_step2, atol=1e-4)
