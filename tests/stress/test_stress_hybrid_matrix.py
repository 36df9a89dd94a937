"""The stress matrix on a hybrid target (issue 45): the conditions that reach a recurrent state say how, `--conditions
hybrid` selects them, a prefix cache that serves nothing with speculation on while it does off fails (vLLM #54360),
and two failing conditions of equal size still leave one smallest."""

from __future__ import annotations

import dataclasses

import pytest

from specbench.errors import SpecbenchError
from specbench.stress.conditions import HYBRID_CONDITIONS, HYBRID_WHY, ServerShape, default_matrix
from specbench.stress.report import StressReport, to_markdown
from specbench.stress.stage import _select
from specbench.stress.verdict import Verdict, judge, smallest_failing
from tests.stress.test_matrix_verdicts import SHAPE, _run

HYBRID = dataclasses.replace(SHAPE, is_hybrid=True, can_restart=True)


def test_a_hybrid_matrix_has_every_hybrid_condition_and_says_why_for_a_recurrent_state():
    conditions, _ = default_matrix(HYBRID)
    by_name = {c.name: c for c in conditions}
    assert set(HYBRID_WHY) <= set(by_name)
    for name in HYBRID_WHY:
        assert by_name[name].why.startswith("hybrid: ") and by_name[name].why == HYBRID_WHY[name]
    assert by_name["zero-draft-mix-8"].concurrency >= 8 and by_name["zero-draft-mix-8"].zero_draft_mix
    turn = by_name["multi-turn"]
    assert turn.multi_turn and turn.cache == "warm" and turn.shared_prefix
    assert turn.prompt_tokens % HYBRID.block_size != 0  # the answer crosses a block: a block verify rounds committed
    dense, _ = default_matrix(dataclasses.replace(HYBRID, is_hybrid=False))
    assert [c.name for c in dense] == [c.name for c in conditions]  # the same conditions, only the reasons differ
    assert not any(c.why.startswith("hybrid: ") for c in dense)
    _, not_run = default_matrix(dataclasses.replace(HYBRID, can_restart=False))
    restart = next(n for n in not_run if n.name == "after-restart")
    assert "--server-cmd" in restart.why and "hybrid: " in restart.why  # what a hybrid loses by not restarting


def test_conditions_hybrid_selects_the_gentle_one_and_those_reaching_the_state():
    conditions, _ = default_matrix(HYBRID)
    assert [c.name for c in _select(conditions, ("hybrid",))] == [c.name for c in conditions
                                                                 if c.name in HYBRID_CONDITIONS]
    picked = [c.name for c in _select(conditions, ("concurrency-8", "hybrid"))]
    assert picked[0] == "concurrency-8" and "zero-draft-mix-8" in picked and "after-restart" in picked
    with pytest.raises(SpecbenchError, match="unknown stress condition"):
        _select(conditions, ("hybrids",))


def _with_hits(run, on: float | None, off: float | None):
    return dataclasses.replace(run, on=dataclasses.replace(run.on, prefix_hit_rate=on),
                               off=dataclasses.replace(run.off, prefix_hit_rate=off))


def test_no_prefix_hits_with_speculation_on_fails_a_cache_condition_only():
    conditions = {c.name: c for c in default_matrix(HYBRID)[0]}
    warm = conditions["warm-cache"]
    lost = judge(_with_hits(_run(warm, [True] * 8, [True] * 8), 0.0, 0.9), "output")
    assert lost.verdict is Verdict.NO_CACHE_HITS and lost.is_failure
    for on, off in ((0.9, 0.9), (0.0, 0.0), (None, 0.9), (0.0, None)):  # hits, none on both, or nothing says
        assert judge(_with_hits(_run(warm, [True] * 8, [True] * 8), on, off), "output").verdict is Verdict.PASS
    cold = judge(_with_hits(_run(conditions["gentle"], [True] * 8, [True] * 8), 0.0, 0.5), "output")
    assert cold.verdict is Verdict.PASS  # a cold condition's hits are timing, not a promise
    corrupt = judge(_with_hits(_run(warm, [False] * 8, [False] * 8, on_texts=["x"] * 8), 0.0, 0.9), "output")
    assert corrupt.verdict is Verdict.FAIL  # corruption is the worse news, named first
    report = StressReport("server, hybrid target (recurrent state), k=3", "output", (lost,), (), 1.0)
    text = to_markdown(report)
    assert report.exit_code == 1 and text.startswith("## specbench stress: FAIL: NO-CACHE-HITS at warm-cache (")
    assert "| 0.0% / 90.0% |" in text


def test_equal_sized_failing_conditions_leave_the_first_as_smallest():
    conditions = {c.name: c for c in default_matrix(HYBRID)[0]}
    twin = dataclasses.replace(conditions["warm-cache"], name="warm-cache-twin")
    verdicts = [judge(_run(c, [False] * 8, [False] * 8, on_texts=["x"] * 8), "output")
                for c in (conditions["warm-cache"], twin)]
    assert [v.verdict for v in verdicts] == [Verdict.FAIL, Verdict.FAIL]
    assert [v.condition.name for v in smallest_failing(verdicts)] == ["warm-cache"]


def test_a_server_target_is_hybrid_when_its_local_config_says_so(tmp_path):
    """A server launched per k (--server-cmd) is not asked before it runs: --target's config.json decides."""
    import json

    from specbench.stress.stage import _declares_recurrent_state

    # a Qwen3-Next config of the tiny hybrid's shape (tests/support/tiny_hybrid.py), the fields it cannot default
    hybrid = {"model_type": "qwen3_next", "vocab_size": 1024, "hidden_size": 64, "intermediate_size": 128,
              "num_hidden_layers": 4, "num_attention_heads": 4, "num_experts": 0, "linear_conv_kernel_dim": 4,
              "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
              "linear_value_head_dim": 16}
    dense = {**hybrid, "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]}
    for name, config in (("hybrid", hybrid), ("dense", dense)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(config))
    assert _declares_recurrent_state(str(tmp_path / "hybrid"))
    assert not _declares_recurrent_state(str(tmp_path / "dense"))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    assert not _declares_recurrent_state(str(tmp_path / "broken"))  # what specbench cannot read: not known hybrid
    assert not _declares_recurrent_state(str(tmp_path / "nowhere")) and not _declares_recurrent_state(None)


def test_the_specbench_server_preset_launches_draftless_methods_without_a_draft():
    from specbench.backends.server_presets import SERVER_PRESETS, LaunchPoint

    preset = SERVER_PRESETS.get("specbench")()
    assert "--draft" not in preset.speculative(LaunchPoint("ngram", 3))  # a hybrid's n-gram twin: no draft to give
    assert "--draft {draft}" in preset.speculative(LaunchPoint("draft", 3))


def test_the_user_says_hybrid_over_what_a_server_or_config_would_say(tmp_path):
    from specbench.runs.sweep_config import SweepConfig
    from specbench.stress.runner import BackendSlot, Side
    from specbench.stress.stage import StressRequest, _server_is_hybrid

    def never_opened():
        raise AssertionError("the server was asked although the user said")

    side = Side("k=3", 3, BackendSlot(never_opened))
    sweep = SweepConfig.from_flat({"target": str(tmp_path), "backend": "openai", "base_url": "http://127.0.0.1:9"})
    assert _server_is_hybrid(StressRequest(sweep, 3, hybrid=True), side) is True
    assert _server_is_hybrid(StressRequest(sweep, 3, hybrid=False), side) is False
    launched = SweepConfig.from_flat({"target": str(tmp_path), "backend": "openai", "server_cmd": "x {port}"})
    assert _server_is_hybrid(StressRequest(launched, 3), side) is False  # not asked before it runs; no config.json
