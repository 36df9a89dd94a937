"""The MTP checkpoint reader: each dialect's real key names map onto the module's, a checkpoint without MTP weights
is one clear error, and the target loader leaves MTP weights to the proposer."""

from __future__ import annotations

import pytest
import torch

from specbench import LLM
from specbench.errors import SpecbenchError
from specbench.models.presets import get_preset
from specbench.selftest.tiny import build_tiny_pair
from specbench.selftest.tiny_mtp import build_mtp_target
from specbench.speculation.drafters.mtp.checkpoint import (
    LAYER_INDEX,
    MTP_PREFIX,
    canonical_name,
    detect_dialect,
    read_mtp_checkpoint,
)


@pytest.fixture(scope="module")
def tiny_target(tmp_path_factory) -> str:
    target, _ = build_tiny_pair(tmp_path_factory.mktemp("mtp_ckpt"), seed=0)
    return target


@pytest.mark.parametrize(("dialect", "name", "canonical"), [
    (LAYER_INDEX, "model.layers.2.enorm.weight", "enorm.weight"),
    (LAYER_INDEX, "model.layers.2.eh_proj.weight", "eh_proj.weight"),
    (LAYER_INDEX, "model.layers.2.shared_head.norm.weight", "final_norm.weight"),
    (LAYER_INDEX, "model.layers.2.self_attn.q_proj.weight", "layers.0.self_attn.q_proj.weight"),
    (LAYER_INDEX, "model.layers.2.mlp.experts.3.down_proj.weight", "layers.0.mlp.experts.3.down_proj.weight"),
    (LAYER_INDEX, "model.layers.2.shared_head.head.weight", None),  # the target's lm_head
    (LAYER_INDEX, "model.layers.2.embed_tokens.weight", None),  # the target's embedding
    (LAYER_INDEX, "model.layers.1.self_attn.q_proj.weight", None),  # a decoder layer
    (MTP_PREFIX, "mtp.fc.weight", "eh_proj.weight"),
    (MTP_PREFIX, "mtp.pre_fc_norm_embedding.weight", "enorm.weight"),
    (MTP_PREFIX, "mtp.pre_fc_norm_hidden.weight", "hnorm.weight"),
    (MTP_PREFIX, "mtp.norm.weight", "final_norm.weight"),
    (MTP_PREFIX, "mtp.layers.0.mlp.gate_proj.weight", "layers.0.mlp.gate_proj.weight"),
    (MTP_PREFIX, "model.norm.weight", None),
])
def test_canonical_names(dialect, name, canonical):
    assert canonical_name(dialect, name, 2) == canonical


def test_dialect_detection_and_the_no_mtp_error():
    assert detect_dialect(["model.norm.weight", "mtp.fc.weight"], 2, "x") == MTP_PREFIX
    assert detect_dialect(["model.layers.1.a", "model.layers.2.eh_proj.weight"], 2, "x") == LAYER_INDEX
    with pytest.raises(SpecbenchError, match="has no MTP weights"):
        detect_dialect(["model.layers.0.a", "model.layers.1.a"], 2, "x")


@pytest.mark.parametrize("dialect", [LAYER_INDEX, MTP_PREFIX])
def test_reader_takes_only_module_tensors(tiny_target, tmp_path, dialect):
    target = build_mtp_target(tiny_target, tmp_path / "t", dialect)
    ckpt = read_mtp_checkpoint(tmp_path / "t", 2, allow_pickle=False)
    assert ckpt.dialect == dialect and ckpt.path == target
    assert {"enorm.weight", "hnorm.weight", "eh_proj.weight", "final_norm.weight"} <= set(ckpt.tensors)
    assert all(n.startswith("layers.0.") for n in set(ckpt.tensors) - {"enorm.weight", "hnorm.weight",
                                                                        "eh_proj.weight", "final_norm.weight"})
    assert ckpt.tensors["eh_proj.weight"].shape == (64, 128)  # [H, embedding H + hidden H]


def test_target_without_mtp_weights_is_one_error(tiny_target):
    with pytest.raises(SpecbenchError, match="has no MTP weights"):
        LLM(tiny_target, dtype="fp32", device="cpu", method="mtp", max_num_steps=2, kv_cache_gb=0.01)


def test_mtp_refuses_a_draft(tiny_target, tmp_path):
    target = build_mtp_target(tiny_target, tmp_path / "t", MTP_PREFIX)
    with pytest.raises(SpecbenchError, match="drop --draft"):
        LLM(target, dtype="fp32", device="cpu", method="mtp", draft=tiny_target, max_num_steps=2, kv_cache_gb=0.01)


def test_target_loader_skips_mtp_weights(tiny_target, tmp_path):
    """The target with MTP weights loads as the same model as without them."""
    plain = LLM(tiny_target, dtype="fp32", device="cpu", kv_cache_gb=0.01).engine.runner.model
    target = build_mtp_target(tiny_target, tmp_path / "t", MTP_PREFIX)
    with_mtp = LLM(target, dtype="fp32", device="cpu", kv_cache_gb=0.01).engine.runner.model
    assert with_mtp.config.num_mtp_modules == 1 and plain.config.num_mtp_modules == 0
    for (name, a), (_, b) in zip(plain.state_dict().items(), with_mtp.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_glm_air_preset_declares_its_mtp_module():
    assert get_preset("glm-4.5-air").num_mtp_modules == 1
    assert get_preset("llama-3.1-8b").num_mtp_modules == 0
