"""The aux-layer convention decides which target layers an EAGLE-3 head reads: a wrong one costs acceptance.

The native head stores SGLang-style layer-output ids [0, 1, 3] in eagle_config (= hidden_states [1, 2, 4]);
reading them as hidden_states indices feeds it layers [0, 1, 3] instead. Output stays lossless either way.
"""

from __future__ import annotations

import pytest
from tests.support.eagle_heads import AUX_HF_INDICES, acceptance_per_pos, run_engine

VARIANT = "eagle3-native-nested"
pytestmark = pytest.mark.slow  # three engine runs with fitted heads behind one fixture: ~19 s


@pytest.fixture(scope="module")
def runs(head_dir, target_dir, prompt_ids):
    def run(**kwargs):
        llm, outs = run_engine(target_dir("t4"), prompt_ids, method="eagle3", draft=str(head_dir(VARIANT)),
                               max_num_steps=3, **kwargs)
        return llm.engine.proposer.describe()["aux_layers"], outs

    return {
        "auto": run(),
        "wrong": run(eagle_aux_convention="hidden-states-index"),
        "override": run(eagle_aux_layer_ids=AUX_HF_INDICES, eagle_aux_convention="hidden-states-index"),
    }


def test_resolution_is_recorded(runs):
    auto, wrong, override = (runs[k][0] for k in ("auto", "wrong", "override"))
    assert auto == {"ids": [0, 1, 3], "source": "checkpoint eagle_config.eagle_aux_hidden_state_layer_ids",
                    "requested_convention": "auto", "convention": "layer-output",
                    "hf_hidden_states_indices": list(AUX_HF_INDICES)}
    assert wrong["convention"] == "hidden-states-index" and wrong["hf_hidden_states_indices"] == [0, 1, 3]
    assert override["source"].startswith("override") and override["hf_hidden_states_indices"] == list(AUX_HF_INDICES)


def test_wrong_convention_lowers_position0_acceptance(runs, plain_outputs):
    right = acceptance_per_pos(runs["auto"][1])[0]
    wrong = acceptance_per_pos(runs["wrong"][1])[0]
    assert right >= 0.5, right
    assert wrong <= right - 0.15 and wrong <= 0.75 * right, (right, wrong)  # measured: 0.66 -> 0.39
    for key in runs:  # the verifier keeps every variant lossless
        assert [list(o.output_token_ids) for o in runs[key][1]] == plain_outputs("t4")


def test_explicit_override_reproduces_the_checkpoint_choice(runs):
    auto, override = runs["auto"][1], runs["override"][1]
    assert [o.stats.accepted_per_round for o in auto] == [o.stats.accepted_per_round for o in override]
