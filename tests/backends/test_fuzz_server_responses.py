"""Property tests over what a server may answer: every parser and check of the HTTP client either accepts the
answer or raises its own clean error (StreamFormatError, ServerAnswerError), never anything else; counts derived
from an accepted stream are never negative and never exceed what a sane check lets through.

Bounded for CI (a few seconds); `-m slow` runs the same properties with many more examples.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specbench.backends.anomalies import Asked, counters_backwards, response_anomalies
from specbench.backends.deadline import Answer, ServerAnswerError, SideDeadlines
from specbench.backends.prometheus import parse_metrics
from specbench.backends.server_adapters import SERVER_ADAPTERS
from specbench.backends.server_info import read_models
from specbench.backends.spec_counters import counter_delta
from specbench.backends.stream_state import StreamFormatError, StreamState
from specbench.backends.token_counts import count_tokens

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                     st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12))
_json = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                     max_leaves=20)
# Events shaped like OpenAI stream chunks, with every field free to be of the wrong type or absurd.
_choice = st.fixed_dictionaries({}, optional={
    "delta": st.one_of(_json, st.fixed_dictionaries({}, optional={"content": _json, "reasoning_content": _json})),
    "text": _json, "finish_reason": _json, "index": _json})
_usage = st.fixed_dictionaries({}, optional={"prompt_tokens": _json, "completion_tokens": _json})
_event = st.one_of(_json, st.fixed_dictionaries({}, optional={
    "choices": st.one_of(_json, st.lists(st.one_of(_choice, _json), max_size=2)), "usage": st.one_of(_usage, _json),
    "model": _json, "timings": _json, "metrics": _json, "meta_info": _json, "error": _json}))


def _stream(events: list) -> StreamState:
    state = StreamState(send_time=0.0)
    for i, event in enumerate(events):
        try:
            state.add_event(json.dumps(event), now=float(i + 1))
        except StreamFormatError:
            break  # the client stops reading a malformed stream: the request is an error row
        except ValueError:  # json.dumps refuses nothing hypothesis builds here but NaN keys; not a server answer
            break
    return state


def _check_stream(events: list, max_tokens: int, ignore_eos: bool) -> None:
    state = _stream(events)
    asked = Asked("m", max_tokens, 100, ignore_eos)
    anomalies = response_anomalies(state, asked) if state.chunks else ()
    fatal = next((a for a in anomalies if a.kind.is_fatal), None)
    counts = count_tokens(state, None, use_usage=fatal is None)
    assert len(counts.emission_times) == len(counts.tokens_per_emission)
    assert all(n >= 0 for n in counts.tokens_per_emission)
    assert list(counts.emission_times) == sorted(counts.emission_times)
    if fatal is None:  # an accepted report is never absurd: bounded by max_tokens plus the checks' slack
        assert sum(counts.tokens_per_emission) <= max(max_tokens + 16, 10 * (len(state.text.encode()) + 1) + 16,
                                                      len(counts.tokens_per_emission))
    for adapter_name in SERVER_ADAPTERS.supported():  # the final event's server fields, read by each adapter
        SERVER_ADAPTERS.create(adapter_name).request_draft(state.server_fields)


@FAST
@given(st.lists(_event, max_size=6), st.integers(1, 64), st.booleans())
def test_any_stream_is_parsed_or_refused_cleanly(events, max_tokens, ignore_eos):
    _check_stream(events, max_tokens, ignore_eos)


class _OneAnswer:
    """A DeadlineClient stand-in that answers every call with one body."""

    deadlines = SideDeadlines()

    def __init__(self, body: bytes, status: int = 200) -> None:
        self._answer = (body, status)

    def get(self, path: str, deadline_s: float, max_bytes: int = 1 << 20) -> Answer:
        return Answer(f"GET {path}", self._answer[1], self._answer[0])


def _check_models(body: bytes, status: int) -> None:
    try:
        models = read_models(_OneAnswer(body, status))
    except ServerAnswerError as err:
        assert "/v1/models" in str(err) and "\n" not in str(err)
        return
    assert all(isinstance(m, str) for m in models)


@FAST
@given(st.one_of(_json.map(lambda v: json.dumps(v).encode()), st.binary(max_size=64)), st.sampled_from([200, 404, 500]))
def test_any_models_answer_is_read_or_refused_cleanly(body, status):
    _check_models(body, status)


_metric_line = st.one_of(
    st.text(max_size=40),
    st.builds(lambda name, labels, value: f"{name}{labels} {value}",
              st.sampled_from(["vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_accepted_tokens_total",
                               "vllm:spec_decode_num_draft_tokens_total", "sglang:spec_accept_length",
                               "vllm:spec_decode_num_accepted_tokens_per_pos_total", "llamacpp:n_drafted_total",
                               "specbench:spec_decode_num_drafts_total", "vllm:generation_tokens_total"]),
              st.one_of(st.just(""), st.just('{position="0"}'), st.just('{position="x"}'), st.just("{"),
                        st.text(max_size=10).map(lambda t: "{" + t + "}")),
              st.one_of(st.floats(allow_nan=True), st.integers(-(2**70), 2**70), st.text(max_size=6))),
)


def _check_metrics(before_lines: list[str], after_lines: list[str]) -> None:
    before, after = parse_metrics("\n".join(before_lines)), parse_metrics("\n".join(after_lines))
    for adapter_name in SERVER_ADAPTERS.supported():
        adapter = SERVER_ADAPTERS.create(adapter_name)
        start, end = adapter.read_counters(before), adapter.read_counters(after)
        counters_backwards(start, end)
        delta, note = counter_delta(start, end)
        assert delta is None or note is None or isinstance(note, str)


@FAST
@given(st.lists(_metric_line, max_size=8), st.lists(_metric_line, max_size=8))
def test_any_metrics_text_is_read_or_ignored_cleanly(before_lines, after_lines):
    _check_metrics(before_lines, after_lines)


@pytest.mark.slow
@LONG
@given(st.lists(_event, max_size=10), st.integers(1, 512), st.booleans())
def test_any_stream_long(events, max_tokens, ignore_eos):
    _check_stream(events, max_tokens, ignore_eos)


@pytest.mark.slow
@LONG
@given(st.lists(_metric_line, max_size=20), st.lists(_metric_line, max_size=20))
def test_any_metrics_text_long(before_lines, after_lines):
    _check_metrics(before_lines, after_lines)
