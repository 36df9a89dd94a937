"""One end of a request for every backend: its last token, with or without text. The real `specbench serve` stream
code is driven by engine steps at known times and read back by the HTTP client: its emissions, tokens per emission
and TPOT equal the embedded engine's for identical outputs, whether the request ends on end-of-sequence (a token
without text, on the text-less finish event) or on max_tokens."""

from __future__ import annotations

import asyncio

import pytest

from specbench.backends.stream_state import StreamState
from specbench.backends.token_counts import ONE_PER_CHUNK, SERVER_PER_CHUNK, count_tokens
from specbench.engine.outputs import RequestOutput
from specbench.engine.stats import RequestStats
from specbench.metrics.request_metrics import RequestMetrics
from specbench.sampling_params import SamplingParams
from specbench.serve.engine_loop import Emitted, Finished
from specbench.serve.generation import stream_events
from specbench.serve.protocol import GenerationRequest
from specbench.serve.responses import ResponseKind

EOS = 0
A, B, C, D = (ord(ch) for ch in "abcd")


class CharTokenizer:
    """Token id = one character; the end-of-sequence id decodes to nothing."""

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids if not (skip_special_tokens and i == EOS))


class StepClock:
    """The engine's event queue: `now` is the time of the step whose event was handed out last."""

    def __init__(self, events: list[tuple[float, object]]) -> None:
        self.events = list(events)
        self.now = 0.0

    async def get(self):
        self.now, event = self.events.pop(0)
        return event


def _over_http(steps: list[tuple[int, ...]], finish: str, *, continuous: bool) -> StreamState:
    """Step j runs at time 1 + j; the request finishes in its last step. Every SSE event is stamped with the time
    of the step that produced it (the network adds nothing)."""
    output_ids = tuple(t for step in steps for t in step)
    output = RequestOutput("r", None, (1, 2), output_ids, CharTokenizer().decode(output_ids), finish,
                           RequestStats(0.0, 2))
    clock = StepClock([(1.0 + j, Emitted(step)) for j, step in enumerate(steps)]
                      + [(float(len(steps)), Finished(output))])
    gen = GenerationRequest("m", (1, 2), SamplingParams(max_tokens=len(output_ids)), True, True, continuous)
    state = StreamState(send_time=0.0)

    async def read() -> None:
        async for event in stream_events(clock, gen, ResponseKind.new(False, "m"), CharTokenizer()):
            data = event.removeprefix("data: ").strip()
            if data != "[DONE]":
                state.add_event(data, clock.now)

    asyncio.run(read())
    return state


def _embedded(steps: list[tuple[int, ...]]) -> RequestStats:
    return RequestStats(0.0, 2, emission_times=[1.0 + j for j in range(len(steps))],
                        tokens_per_emission=[len(step) for step in steps])


CASES = {  # engine steps (token ids each step committed), finish reason
    "plain, ends on EOS": ([(A,), (B,), (C,), (EOS,)], "stop"),
    "plain, ends on max_tokens": ([(A,), (B,), (C,), (D,)], "length"),
    "speculative, EOS inside a step with text": ([(A, B), (C, EOS)], "stop"),
    "speculative, EOS alone in the last step": ([(A, B, C), (EOS,)], "stop"),
    "EOS first": ([(EOS,)], "stop"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_http_emissions_equal_the_engines_with_per_chunk_usage(case):
    steps, finish = CASES[case]
    state = _over_http(steps, finish, continuous=True)
    counts = count_tokens(state)
    embedded = _embedded(steps)
    assert counts.source == SERVER_PER_CHUNK and state.finish_reason == finish
    assert counts.emission_times == tuple(embedded.emission_times)
    assert counts.tokens_per_emission == tuple(embedded.tokens_per_emission)
    http = RequestStats(0.0, 2, emission_times=list(counts.emission_times),
                        tokens_per_emission=list(counts.tokens_per_emission))
    assert RequestMetrics.from_stats(http) == RequestMetrics.from_stats(embedded)


@pytest.mark.parametrize("case", ["plain, ends on EOS", "plain, ends on max_tokens", "EOS first"])
def test_plain_decoding_without_per_chunk_usage_reads_one_token_per_emission(case):
    """llama.cpp-style streams (usage only at the end, no tokenizer): the EOS token is the finish event's."""
    steps, finish = CASES[case]
    counts = count_tokens(_over_http(steps, finish, continuous=False))
    assert counts.source == ONE_PER_CHUNK
    assert counts.tokens_per_emission == (1,) * len(steps)
    assert counts.emission_times == tuple(_embedded(steps).emission_times)


def test_tpot_of_an_eos_ended_request_spans_to_its_last_token():
    steps, finish = CASES["plain, ends on EOS"]
    metrics = RequestMetrics.from_stats(RequestStats(0.0, 2, emission_times=list(count_tokens(
        _over_http(steps, finish, continuous=True)).emission_times), tokens_per_emission=[1, 1, 1, 1]))
    assert metrics.e2e_s == 4.0 and metrics.ttft_s == 1.0
    assert metrics.tpot_s == pytest.approx((4.0 - 1.0) / (4 - 1)) and metrics.tokens_per_emission == 1.0
