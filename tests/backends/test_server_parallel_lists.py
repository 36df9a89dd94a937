"""Lists a server sends side by side (one entry per token) are never paired to the shortest: a server that returns
7 tokens and 2 logprobs fails the gate's logprobs stage and its streamed request, instead of passing on 2 tokens."""

from __future__ import annotations

import pytest

from specbench.backends.near_tie import UNCLASSIFIED
from specbench.backends.server_logprobs import MalformedLogprobs, parse_llamacpp_native, parse_logprobs
from specbench.gate.stage import Status

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.support.asgi_thread import serve_in_thread

TOKENS = [" one", " two", " three", " four", " five", " six", " seven"]
LOGPROBS = [-0.1 * (i + 1) for i in range(len(TOKENS))]
SHORT = {"tokens": TOKENS, "token_logprobs": LOGPROBS[:2], "top_logprobs": [{t: v} for t, v in zip(TOKENS, LOGPROBS)]}


@pytest.mark.parametrize("logprobs, message", [
    (SHORT, "7 logprobs.tokens, 2 logprobs.token_logprobs, 7 logprobs.top_logprobs"),
    ({**SHORT, "token_logprobs": LOGPROBS, "top_logprobs": [{}]}, "1 logprobs.top_logprobs"),
    ({"content": [{"token": "a", "logprob": -0.1, "top_logprobs": []}, None]}, r"logprobs.content\[1\] is NoneType"),
])
def test_parallel_lists_of_unequal_length_are_malformed(logprobs, message):
    with pytest.raises(MalformedLogprobs, match=message):
        parse_logprobs({"logprobs": logprobs})
    with pytest.raises(MalformedLogprobs, match=r"completion_probabilities\[0\] is str"):
        parse_llamacpp_native({"completion_probabilities": ["x"]})
    even = parse_logprobs({"logprobs": {**SHORT, "token_logprobs": LOGPROBS}})
    assert [t.token for t in even] == TOKENS


def _server(answer: dict):
    async def completions(request):
        return JSONResponse(answer)

    async def models(request):
        return JSONResponse({"data": [{"id": "fake"}]})

    return Starlette(routes=[Route("/v1/completions", completions, methods=["POST"]), Route("/v1/models", models)])


def _config(url: str):
    from specbench.runs.sweep_config import SweepConfig
    from tests.support.tiny_models import data_dir

    return SweepConfig(backend="openai", base_url=url, workload="gsm8k", data_dir=str(data_dir()), limit=1,
                       shots=0, info_timeout=5.0, metrics_timeout=5.0)


@pytest.mark.parametrize("logprobs, usage", [
    (SHORT, {"prompt_tokens": 5, "completion_tokens": 7}),  # 7 tokens, 2 logprobs
    # one entry per token, but 2 entries for 7 generated tokens
    ({"tokens": TOKENS[:2], "token_logprobs": [-0.1, -0.2], "top_logprobs": [{" one": -0.1}, {" two": -0.2}]},
     {"prompt_tokens": 5, "completion_tokens": 7}),
])
def test_the_gate_logprobs_stage_fails_on_fewer_logprobs_than_tokens(logprobs, usage):
    from specbench.gate.logprobs_collect import server_logprobs
    from specbench.gate.logprobs_stage import LogprobsTolerance, logprobs_stage

    answer = {"choices": [{"index": 0, "text": "".join(TOKENS), "finish_reason": "length", "logprobs": logprobs}],
              "usage": usage}
    with serve_in_thread(_server(answer)) as url:
        run = server_logprobs(_config(url), "k=2 server")
    result = logprobs_stage(run, None, LogprobsTolerance(0.3, 0.02, 0.0, 0.1, "test"))
    assert result.status is Status.FAIL, result
    assert "1 malformed logprobs response(s)" in result.reason and "sample " in result.details[0], result


def test_a_streamed_request_with_uneven_logprobs_fails_alone():
    import json

    from specbench.backends.stream_state import StreamFormatError, StreamState

    state = StreamState()
    event = {"choices": [{"index": 0, "text": "".join(TOKENS), "finish_reason": None, "logprobs": SHORT}]}
    with pytest.raises(StreamFormatError, match="malformed logprobs .7 logprobs.tokens, 2 logprobs.token_logprobs"):
        state.add_event(json.dumps(event), 0.0)
    assert state.logprobs == []


def test_a_near_tie_probe_on_uneven_logprobs_is_unclassified():
    from specbench.backends.deadline import DeadlineClient
    from specbench.backends.near_tie import diagnose

    answer = {"choices": [{"index": 0, "text": "ab", "logprobs": {"tokens": ["a", "b"], "top_logprobs": [{"a": -1}]}}]}
    with serve_in_thread(_server(answer)) as url:
        diagnosis = diagnose(DeadlineClient(url), "fake", "p", "ab", "ac", deadline_s=5.0)
    assert diagnosis.verdict == UNCLASSIFIED
    assert diagnosis.note == ("the reference server's logprobs are malformed (2 logprobs.tokens, 1 "
                              "logprobs.top_logprobs)")


def test_prompt_logprobs_of_another_length_than_the_reference_fail():
    from specbench.backends.server_logprobs import ServerTokenLogprob as T
    from specbench.gate.logprobs_collect import LogprobsRun, LogprobsSample
    from specbench.gate.logprobs_stage import LogprobsTolerance, logprobs_stage

    out = (T("a", -0.1, (("a", -0.1),)),)
    full = (None, T("x", -1.0, (("x", -1.0),)), T("y", -2.0, (("y", -0.5),)))
    now = LogprobsRun("k=2", (LogprobsSample("0", out, full[:2]),))
    result = logprobs_stage(now, LogprobsRun("k=0", (LogprobsSample("0", out, full),)),
                            LogprobsTolerance(0.3, 0.02, 0.0, 0.1, "test"))
    assert result.status is Status.FAIL and "1 prompt(s) with logprobs of another length" in result.reason, result


def test_a_per_position_counter_that_vanishes_between_scrapes_went_backwards():
    from specbench.backends.anomalies import counters_backwards
    from specbench.backends.spec_counters import SpecCounters

    before = SpecCounters("vllm", 10.0, 30.0, 17.0, (10.0, 5.0, 2.0), 100.0)
    after = SpecCounters("vllm", 12.0, 36.0, 20.0, (12.0, 6.0), 110.0)  # position 2 gone: 2 -> 0
    assert [str(a) for a in counters_backwards(before, after)] == [
        "counter_backwards: vllm accepted at position 2 2 -> 0"]
    grown = SpecCounters("vllm", 12.0, 36.0, 20.0, (12.0, 6.0, 2.0, 1.0), 110.0)  # a new position counts from 0
    assert counters_backwards(before, grown) == ()


def test_a_reference_keeps_its_malformed_logprobs(tmp_path):
    """A reference recorded from a server with malformed logprobs fails the stage it is compared in, read back."""
    from specbench.backends.server_logprobs import ServerTokenLogprob as T
    from specbench.gate.logprobs_collect import LogprobsRun, LogprobsSample
    from specbench.gate.logprobs_stage import LogprobsTolerance, logprobs_stage
    from specbench.gate.reference import GateSettings, read_reference, reference_of, write_reference
    from tests.gate.test_gate_stages import _observation

    sample = LogprobsSample("0", (T("a", -0.1, (("a", -0.1),)),), None)
    run = LogprobsRun("k=0", (sample,), malformed=("sample 1: 7 logprobs.tokens, 2 logprobs.token_logprobs",))
    path = tmp_path / "ref.json"
    write_reference(reference_of(_observation(), GateSettings("gsm8k", 4, 1, 16, 2, 1), "server", run), path)
    reference = read_reference(path).logprobs
    assert reference == run
    result = logprobs_stage(LogprobsRun("k=2", (sample,)), reference, LogprobsTolerance(0.3, 0.02, 0.0, 0.1, "t"))
    assert result.status is Status.FAIL and "malformed logprobs response(s) from the reference" in result.reason
