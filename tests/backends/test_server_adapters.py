"""Server adapters on recorded (llama.cpp) and docs-written (vLLM, SGLang) /metrics texts and response bodies:
detection, counters, per-request draft counts (see fixtures/README.md for each file's origin)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.backends.prometheus import parse_metrics
from specbench.backends.server_adapters import SERVER_ADAPTERS, ServerProbe, choose_adapter
from specbench.backends.spec_counters import counter_delta
from specbench.bench.server_acceptance import server_acceptance
from specbench.errors import SpecbenchError

FIXTURES = Path(__file__).with_name("fixtures")


def _samples(name: str):
    return tuple(parse_metrics((FIXTURES / name).read_text()))


def _event(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def _detect(samples, version=None, props=None):
    adapter, how = choose_adapter("auto", ServerProbe(samples, version, props))
    return adapter, how


def test_vllm_from_docs():
    adapter, how = _detect(_samples("vllm_metrics.txt"), {"version": "0.11.0"})
    assert adapter.name == "vllm" and how == "detected"
    counters = adapter.read_counters(_samples("vllm_metrics.txt"))
    assert (counters.num_drafts, counters.num_draft_tokens, counters.num_accepted_tokens) == (12, 36, 20)
    assert counters.num_accepted_per_pos == (10, 6, 4) and counters.num_generation_tokens == 32
    draft = adapter.request_draft(_event("vllm_final_chunk.json"))
    assert (draft.num_draft_rounds, draft.num_draft_tokens, draft.num_accepted_tokens) == (8, 24, 15)
    assert draft.num_accepted_per_pos == (6, 5, 4)  # from the histogram [2, 1, 1, 4] of accepted per step
    assert sum(draft.num_accepted_per_pos) == draft.num_accepted_tokens
    assert adapter.request_draft({"choices": []}) is None  # summary off: nothing per request


def test_sglang_from_source():
    adapter, _ = _detect(_samples("sglang_metrics.txt"))
    assert adapter.name == "sglang"
    counters = adapter.read_counters(_samples("sglang_metrics.txt"))
    assert counters.num_drafts == 40 and counters.num_accepted_tokens is None  # the gauge is never read
    draft = adapter.request_draft(_event("sglang_final_event.json"))
    assert draft.num_draft_rounds == 9 and draft.num_accepted_tokens is None


def test_detection_by_version_and_props_and_override():
    assert _detect((), {"version": "0.1.0", "server": "specbench"})[0].name == "specbench"
    assert _detect((), None, {"build_info": "b1-abc"})[0].name == "llamacpp"
    adapter, how = _detect(())
    assert adapter is None and "no known server" in how
    adapter, how = choose_adapter("vllm", ServerProbe(_samples("sglang_metrics.txt"), None, None))
    assert adapter.name == "vllm" and how == "--server-adapter vllm"
    assert adapter.read_counters(_samples("sglang_metrics.txt")) is None
    with pytest.raises(SpecbenchError, match="unknown server adapter 'tgi'; supported: llamacpp, sglang, specbench"):
        SERVER_ADAPTERS.create("tgi")


def test_variable_draft_lengths_keep_every_position():
    """An n-gram drafter drafting past --num-steps: AL and rates stay exact, every position is kept."""
    def page(drafts, accepted, per_pos):
        lines = [f"llamacpp:spec_decode_num_drafts_total {drafts}", f"llamacpp:spec_decode_num_accepted_tokens_total "
                 f"{accepted}", f"llamacpp:spec_decode_num_draft_tokens_total {drafts * 8}",
                 "llamacpp:tokens_predicted_total 0"]
        lines += [f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {n}'
                  for i, n in enumerate(per_pos)]
        return tuple(parse_metrics("\n".join(lines)))

    adapter = SERVER_ADAPTERS.create("llamacpp")
    before = adapter.read_counters(page(0, 0, ()))
    after = adapter.read_counters(page(4, 30, (4, 4, 3, 3, 3, 3, 2, 2, 2, 2, 1, 1)))
    delta, note = counter_delta(before, after)
    row = server_acceptance(delta, note, num_positions=3)
    assert row["acceptance_length"] == pytest.approx(1 + 30 / 4)
    assert row["acceptance_length_from_positions"] == pytest.approx(1 + 30 / 4) and row["is_acceptance_consistent"]
    assert len(row["server_accepted_per_pos"]) == 12 and row["accept_rate_pos_3"] == pytest.approx(3 / 4)
    assert "12 draft positions" in row["acceptance_note"]


def test_llamacpp_recorded_from_a_real_server():
    before, after = _samples("llamacpp_metrics_before.txt"), _samples("llamacpp_metrics_after.txt")
    props = json.loads((FIXTURES / "llamacpp_props.json").read_text())
    assert _detect(before)[0].name == "llamacpp" and _detect((), None, props)[0].name == "llamacpp"
    adapter = SERVER_ADAPTERS.create("llamacpp")
    assert adapter.read_counters(before).num_accepted_per_pos == ()  # no per-position line before any draft
    delta, note = counter_delta(adapter.read_counters(before), adapter.read_counters(after))
    assert note is None
    assert (delta.num_drafts, delta.num_draft_tokens, delta.num_accepted_tokens) == (8, 23, 23)
    assert delta.num_accepted_per_pos == (8, 8, 7) and delta.num_generation_tokens == 32
    final = _event("llamacpp_final_chunk.json")
    draft = adapter.request_draft(final)
    assert (draft.num_draft_tokens, draft.num_accepted_tokens, draft.num_draft_rounds) == (23, 23, None)
    assert final["usage"]["completion_tokens"] == 32 and final["choices"][0]["finish_reason"] == "length"
    row = server_acceptance(delta, None, num_positions=3)
    assert row["acceptance_length"] == pytest.approx(1 + 23 / 8) and row["is_acceptance_consistent"]


def test_llamacpp_logprobs_shape_recorded():
    from specbench.backends.near_tie import parse_logprobs

    tokens = parse_logprobs(_event("llamacpp_logprobs_speculative.json")["choices"][0])
    assert tokens[0].token == " " and len(tokens[0].top) == 5 and tokens[0].top[0][0] == " "
    assert tokens[1].top == ()  # accepted draft tokens carry no alternatives on a speculating llama-server


def test_llamacpp_ngram_recorded_drafts_past_num_steps():
    """Recorded: n-gram drafts of up to 37 tokens with --spec-draft-n-max 4; from a fresh server, so the scrape
    itself is the window's delta."""
    adapter = SERVER_ADAPTERS.create("llamacpp")
    counters = adapter.read_counters(_samples("llamacpp_ngram_metrics.txt"))
    assert (counters.num_drafts, counters.num_draft_tokens, counters.num_accepted_tokens) == (2, 37, 37)
    row = server_acceptance(counters, None, num_positions=4)
    assert row["acceptance_length"] == pytest.approx(1 + 37 / 2) and row["is_acceptance_consistent"]
    assert len(row["server_accepted_per_pos"]) == 48 and sum(row["server_accepted_per_pos"]) == 37
    assert row["accept_rate_pos_4"] == 1.0 and "48 draft positions" in row["acceptance_note"]
    draft = adapter.request_draft(_event("llamacpp_ngram_response.json"))
    assert (draft.num_draft_tokens, draft.num_accepted_tokens) == (37, 37)
