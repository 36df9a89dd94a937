"""Pieces of the HTTP backend and server on fixed inputs: Prometheus counters and their deltas, SSE, stream events,
tokens per chunk, incremental text with stop strings, request parsing."""

from __future__ import annotations

import asyncio

import pytest

from specbench.backends.prometheus import parse_metrics
from specbench.backends.server_adapters import ServerProbe, choose_adapter
from specbench.backends.spec_counters import counter_delta
from specbench.backends.sse import sse_data
from specbench.backends.stream_state import StreamFormatError, StreamState
from specbench.backends.token_counts import ONE_PER_CHUNK, SERVER_PER_CHUNK, count_tokens
from specbench.bench.server_acceptance import server_acceptance


def _vllm_page(drafts: int, draft_tokens: int, accepted: int, per_pos: tuple[int, ...], generated: int) -> str:
    """Two data-parallel engines splitting every counter unevenly (label sets must be summed)."""
    lines = ["# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.",
             "# TYPE vllm:spec_decode_num_drafts counter"]
    for engine, share in (("0", 0.25), ("1", 0.75)):
        labels = f'engine="{engine}",model_name="m \\"q\\""'
        lines += [
            f"vllm:spec_decode_num_drafts_total{{{labels}}} {drafts * share}",
            f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {draft_tokens * share}",
            f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {accepted * share}",
            f"vllm:spec_decode_num_drafts_created{{{labels}}} 1.7e9",
            f"vllm:generation_tokens_total{{{labels}}} {generated * share}",
            "vllm:spec_decode_acceptance_gauge 0.99",  # a running value: must be ignored
        ]
        lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{k}"}} {n * share}'
                  for k, n in enumerate(per_pos)]
    return "\n".join(lines + ["garbage line {", ""])


def read_spec_counters(samples):
    """What the auto-detected adapter reads from one scrape."""
    adapter, _ = choose_adapter("auto", ServerProbe(tuple(samples), None, None))
    return None if adapter is None else adapter.read_counters(samples)


def test_vllm_counters_are_summed_over_label_sets_and_differenced():
    before = read_spec_counters(parse_metrics(_vllm_page(100, 300, 150, (80, 50, 20), 1000)))
    after = read_spec_counters(parse_metrics(_vllm_page(140, 420, 230, (110, 80, 40), 1400)))
    assert before.source == "vllm" and before.num_drafts == 100 and before.num_accepted_per_pos == (80, 50, 20)
    delta, note = counter_delta(before, after)
    assert note is None and (delta.num_drafts, delta.num_draft_tokens, delta.num_accepted_tokens) == (40, 120, 80)
    assert delta.num_accepted_per_pos == (30, 30, 20) and delta.num_generation_tokens == 400
    row = server_acceptance(delta, None, num_positions=3)
    assert row["acceptance_length"] == pytest.approx(1 + 80 / 40) and row["acceptance_rate"] == pytest.approx(80 / 120)
    assert row["accept_rate_pos_2"] == pytest.approx(30 / 40)
    assert row["cond_accept_rate_pos_3"] == pytest.approx(20 / 30)
    assert row["is_acceptance_consistent"] and row["acceptance_source"] == "server:vllm"
    assert counter_delta(after, before) == (None, "the server's counters went down during the cell (restarted?)")


def test_sglang_gives_only_an_approximate_length_and_no_counters_give_none():
    page = ('sglang:spec_verify_calls_total{{tp_rank="0"}} {}\nsglang:generation_tokens_total {}\n'
            "sglang:spec_accept_length 9")
    delta, _ = counter_delta(read_spec_counters(parse_metrics(page.format(10, 100))),
                             read_spec_counters(parse_metrics(page.format(30, 160))))
    row = server_acceptance(delta, None, num_positions=2)
    assert row["acceptance_length"] == pytest.approx(60 / 20) and row["acceptance_rate"] is None
    assert "approximate" in row["acceptance_note"]
    assert read_spec_counters(parse_metrics("vllm:generation_tokens_total 5")) is None
    empty = server_acceptance(None, "no counters", num_positions=2)
    assert empty["acceptance_length"] is None and empty["accept_rate_pos_2"] is None and empty["acceptance_note"]


def test_sse_events_and_stream_state():
    async def lines():
        for line in [": comment", 'data: {"choices": [{"text": "a", "finish_reason": null}]}', "", "event: x",
                     'data: {"choices": [{"delta": {"content": "b"},', 'data: "finish_reason": "stop"}]}', "",
                     "data: [DONE]", ""]:
            yield line

    async def collect():
        return [data async for data in sse_data(lines())]

    events = asyncio.run(collect())
    assert events[-1] == "[DONE]" and len(events) == 3
    state = StreamState()
    for n, data in enumerate(events[:-1]):
        state.add_event(data, float(n))
    assert state.text == "ab" and state.finish_reason == "stop" and not state.is_usage_reported
    for bad in ("{not json", '{"object": "error", "message": "overloaded"}', '{"id": 1}'):
        with pytest.raises(StreamFormatError):
            StreamState().add_event(bad, 0.0)


def test_cached_prompt_tokens_come_from_usage_details_where_sent():
    """vLLM, SGLang and llama.cpp send usage.prompt_tokens_details.cached_tokens; a server that does not, or sends
    no number, leaves it unknown; the requests table records it only where a prompt can hold it."""
    from specbench.backends.openai_backend import _cached_prompt_tokens

    sent = StreamState()
    sent.add_event('{"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 2, '
                   '"prompt_tokens_details": {"cached_tokens": 32}}}', 1.0)
    assert sent.cached_prompt_tokens == 32
    for usage in ('{"prompt_tokens": 40}', '{"prompt_tokens": 40, "prompt_tokens_details": null}',
                  '{"prompt_tokens": 40, "prompt_tokens_details": {"cached_tokens": "many"}}'):
        state = StreamState()
        state.add_event(f'{{"choices": [], "usage": {usage}}}', 1.0)
        assert state.cached_prompt_tokens is None, usage
    assert [_cached_prompt_tokens(n, 40) for n in (None, 0, 32, 40, 41, -1)] == [None, 0, 32, 40, None, None]


def _state(chunks: list[tuple[str, int | None]], final: int | None, finish: str | None = None) -> StreamState:
    """Text chunks at times 0, 1, ...; then, at time 9, the text-less finish event (when `finish`) and usage."""
    state = StreamState()
    for n, (text, cumulative) in enumerate(chunks):
        usage = "" if cumulative is None else f', "usage": {{"prompt_tokens": 3, "completion_tokens": {cumulative}}}'
        state.add_event(f'{{"choices": [{{"text": {text!r}}}]{usage}}}'.replace("'", '"'), float(n))
    if finish is not None:
        state.add_event(f'{{"choices": [{{"text": "", "finish_reason": "{finish}"}}]}}', 9.0)
    if final is not None:
        state.add_event(f'{{"choices": [], "usage": {{"prompt_tokens": 3, "completion_tokens": {final}}}}}', 9.5)
    return state


def test_tokens_per_chunk_prefer_server_counts_and_match_the_usage_total():
    exact = count_tokens(_state([("a", 1), ("", 1), ("bc", 4), ("d", 5)], final=6, finish="stop"))
    assert exact.tokens_per_emission == (1, 3, 1, 1) and exact.source == SERVER_PER_CHUNK
    assert exact.emission_times == (0.0, 2.0, 3.0, 9.5)  # the EOS token: the event that first counted it
    at_length = count_tokens(_state([("a", 1), ("bc", 3), ("d", 4)], final=4, finish="length"))
    assert at_length.tokens_per_emission == (1, 2, 1) and at_length.emission_times == (0.0, 1.0, 2.0)
    fallback = count_tokens(_state([("a", None), ("b", None), ("c", None)], final=7, finish="length"))
    assert fallback.tokens_per_emission == (1, 1, 5) and fallback.source == ONE_PER_CHUNK
    eos = count_tokens(_state([("a", None), ("b", None)], final=3, finish="stop"))
    assert eos.tokens_per_emission == (1, 1, 1) and eos.emission_times == (0.0, 1.0, 9.0)  # at the finish event
    fewer = count_tokens(_state([("a", None), ("b", None), ("c", None)], final=2, finish="stop"))
    assert fewer.tokens_per_emission == (1, 1, 0)
    assert count_tokens(_state([("a", None), ("b", None)], final=None)).tokens_per_emission == (1, 1)
    with_text = _state([("a", None)], final=None)
    with_text.add_event('{"choices": [{"text": "b", "finish_reason": "stop"}]}', 1.0)  # EOS in the step with text
    with_text.add_event('{"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3}}', 9.0)
    assert count_tokens(with_text).tokens_per_emission == (1, 2)
    untrusted = count_tokens(_state([("a", None), ("b", None)], final=10**12, finish="stop"), use_usage=False)
    assert untrusted.tokens_per_emission == (1, 1)  # a report that failed a sanity check is not used


def test_text_streamer_holds_back_stop_prefixes_and_partial_characters():
    from specbench.serve.text_stream import TextStreamer

    class CharTokenizer:  # token id = one character; 0xFFFD marks half a character
        def decode(self, ids, skip_special_tokens=True):
            return "".join(chr(i) for i in ids)

    streamer = TextStreamer(CharTokenizer(), stop=("\nQuestion:",))
    sent = [streamer.push([ord(c) for c in part]) for part in ("ab", "c\nQu", "\ufffd", "x", "\nQuestion: more")]
    assert sent == ["ab", "c", "", "\nQu\ufffdx", ""]
    assert streamer.finish("abc\nQu\ufffdx") == ""
    assert "".join(sent) == "abc\nQu\ufffdx"


def test_request_parsing(tiny_tokenizer):
    import json

    from specbench.serve.protocol import BadRequest, parse_chat, parse_completion

    def completion(body):
        return parse_completion(json.dumps(body).encode(), tiny_tokenizer, 64)

    gen = completion({"prompt": [5, 6, 7], "max_tokens": 3, "temperature": 0, "stop": "x", "top_k": 0,
                      "stream": True, "stream_options": {"include_usage": True}})
    assert gen.prompt_token_ids == (5, 6, 7) and gen.params.stop == ("x",) and gen.params.top_k == -1
    assert gen.include_usage and not gen.continuous_usage and gen.params.max_tokens == 3
    chat = parse_chat(json.dumps({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}).encode(),
                      tiny_tokenizer, 64)
    assert chat.params.max_tokens == 64 - len(chat.prompt_token_ids) and chat.params.temperature == 1.0
    for body in ({"prompt": ["a", "b"]}, {"prompt": "a", "n": 3}, {"prompt": "a", "temperature": "hot"},
                 {"prompt": "a", "top_p": 0}, {"prompt": "a", "stop": [1]}):
        with pytest.raises(BadRequest):
            completion(body)
    with pytest.raises(BadRequest):
        parse_chat(b'{"messages": [{"role": "robot", "content": "x"}]}', tiny_tokenizer, 64)


@pytest.fixture(scope="module")
def tiny_tokenizer():
    from tests.support.tiny_models import load_tiny_tokenizer

    return load_tiny_tokenizer()
