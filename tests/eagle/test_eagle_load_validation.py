"""Strict load-time validation: each malformed head fails with one SpecbenchError naming the key or field."""

from __future__ import annotations

import json

import pytest
import torch
from tests.support.eagle_heads import VARIANTS, unfitted_tensors, write_head

from specbench import LLM
from specbench.attention import create_backend
from specbench.errors import SpecbenchError
from specbench.models.layers import rope_inv_freq
from specbench.models.loader import load_model
from specbench.speculation.drafters.eagle.loader import load_eagle_head


@pytest.fixture(scope="module")
def targets(target_dir):
    return {n: load_model(str(target_dir(n)), dtype=torch.float32, device="cpu", attn_backend="torch")
            for n in ("t2", "t4")}


def _write(tmp_path, target_dir, variant, tensors_edit=None, config_edit=None):
    v = VARIANTS[variant]
    tensors = unfitted_tensors(target_dir(v.target), v.recipe)
    if tensors_edit:
        tensors_edit(tensors)
    out = write_head(tmp_path / variant, tensors, v, target_dir(v.target))
    if config_edit:
        cfg = json.loads((out / "config.json").read_text())
        config_edit(cfg)
        (out / "config.json").write_text(json.dumps(cfg))
    return out


def _load(path, target, method, aux_override=None):
    return load_eagle_head(str(path), method=method, target=target, aux_override=aux_override, aux_convention="auto",
                           attn_backend=create_backend("torch"), dtype=torch.float32, device=torch.device("cpu"),
                           allow_pickle=True)


def _set(key, value):
    return lambda d: d.__setitem__(key, value)


CASES = {
    # name: (variant, tensors_edit, config_edit, method, aux_override, words the message must contain)
    "hidden-size": ("eagle1-nobias", None, _set("hidden_size", 32), "eagle", None, ["hidden_size", "32", "64"]),
    "fc-width": ("eagle3-native-nested", _set("fc.weight", torch.zeros(64, 128)), None, "eagle3", None,
                 ["'fc.weight'", "(64, 128)", "(64, 192)", "3 aux layers"]),
    "aux-count": ("eagle3-native-nested", None, None, "eagle3", (1, 2), ["'fc.weight'", "2 aux layers"]),
    "aux-range": ("eagle3-speculators", None, None, "eagle3", (1, 2, 9), ["[1, 2, 9]", "outside [0, 4]"]),
    "d2t-range": ("eagle3-native-nested", lambda t: t["d2t"].__setitem__(7, 5000), None, "eagle3", None,
                  ["'d2t'", "draft id 7", "5007", "target vocabulary 1024 ids"]),
    "draft-vocab-larger": ("eagle3-speculators", None, _set("draft_vocab_size", 2048), "eagle3", None,
                           ["draft vocabulary (2048 ids", "target vocabulary (1024 ids"]),
    "t2d": ("eagle3-native-nested", lambda t: t["t2d"].__setitem__(0, False), None, "eagle3", None, ["'t2d'"]),
    "missing-key": ("eagle3-native-nested", lambda t: t.pop("layers.0.hidden_norm.weight"), None, "eagle3", None,
                    ["missing weight 'midlayer.hidden_norm.weight'"]),
    "unexpected-key": ("eagle1-nobias", _set("layers.0.input_layernorm.weight", torch.ones(64)), None, "eagle", None,
                       ["unexpected weight 'layers.0.input_layernorm.weight'"]),
    "bias-declared-absent": ("eagle1-bias-bin", None, _set("bias", False), "eagle", None,
                             ["unexpected weight 'fc.bias'"]),
    "bias-default-missing": ("eagle1-nobias", None, lambda d: d.pop("bias"), "eagle", None,
                             ["missing weight 'fc.bias'"]),
    "vocab": ("eagle3-speculators", None, lambda d: d["transformer_layer_config"].__setitem__("vocab_size", 2048),
              "eagle3", None, ["vocab_size 2048", "1024"]),
    "lm-head-rows": ("eagle3-speculators", _set("lm_head.weight", torch.zeros(1000, 64)), None, "eagle3", None,
                     ["'lm_head.weight'", "draft_vocab_size 1024"]),
    "method": ("eagle3-speculators", None, None, "eagle", None, ["EAGLE-3", "--method eagle3"]),
    "unsupported-flag": ("eagle3-speculators", None, _set("norm_before_fc", True), "eagle3", None, ["norm_before_fc"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_head_is_refused(case, tmp_path, target_dir, targets):
    variant, tensors_edit, config_edit, method, aux_override, words = CASES[case]
    path = _write(tmp_path, target_dir, variant, tensors_edit, config_edit)
    with pytest.raises(SpecbenchError) as info:
        _load(path, targets[VARIANTS[variant].target], method, aux_override)
    for word in words:
        assert word in str(info.value), str(info.value)


# variant: (fc_bias, norm_before_residual, embedding, draft vocab, mapped, rope_theta, aux ids as given, HF indices)
EXPECTED_FACTS = {
    "eagle1-bias-bin": (True, None, "target", 1024, False, 10000.0, None, None),
    "eagle1-nobias": (False, None, "own", 1024, False, 10000.0, None, None),
    "eagle3-native-nested": (False, False, "target", 512, True, 20000.0, [0, 1, 3], [1, 2, 4]),
    "eagle3-native-flat": (False, False, "target", 512, True, 20000.0, [1, 2, 4], [1, 2, 4]),
    "eagle3-speculators": (False, True, "target", 1024, False, 20000.0, [1, 2, 4], [1, 2, 4]),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_well_formed_heads_load_and_describe_themselves(variant, tmp_path, target_dir, targets):
    v = VARIANTS[variant]
    loaded = _load(_write(tmp_path, target_dir, variant), targets[v.target], v.method)
    d = loaded.describe()
    aux = d["aux_layers"]
    got = (d["fc_bias"], d["norm_before_residual"], d["embedding"], d["vocab_mapping"]["draft_vocab_size"],
           d["vocab_mapping"]["mapped"], d["rope_theta"], aux and aux["ids"], aux and aux["hf_hidden_states_indices"])
    assert (d["dialect"], got) == (v.dialect, EXPECTED_FACTS[variant])
    assert loaded.feature_layers == ((-1,) if v.method == "eagle" else (1, 2, 4))
    # RoPE from the head's own config, never the target's (10000 for both targets here)
    assert torch.allclose(loaded.head.rotary.inv_freq, rope_inv_freq(16, d["rope_theta"], None))


def test_engine_surfaces_the_error(tmp_path, target_dir):
    path = _write(tmp_path, target_dir, "eagle3-native-nested", lambda t: t.pop("norm.weight"))
    with pytest.raises(SpecbenchError, match="missing weight 'norm.weight'"):
        LLM(str(target_dir("t4")), method="eagle3", draft=str(path), max_num_steps=2, dtype="fp32", device="cpu")


def test_pickle_weights_need_permission(tmp_path, target_dir):
    path = _write(tmp_path, target_dir, "eagle1-bias-bin")
    with pytest.raises(SpecbenchError, match="allow-pickle"):
        LLM(str(target_dir("t2")), method="eagle", draft=str(path), max_num_steps=2, dtype="fp32", device="cpu")
