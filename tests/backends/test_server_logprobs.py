"""The OpenAI client reads logprobs in every shape servers send (vLLM completions/chat/prompt_logprobs, llama-server
chat-style, native and post-sampling forms, specbench serve's own), keeps 0.0 as sent, and flags degenerate ones."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from specbench.workloads.base import Message, Prompt, Sample

from specbench.backends.request_body import CHAT_PATH, COMPLETIONS_PATH, build_request
from specbench.backends.server_logprobs import (
    ServerTokenLogprob,
    is_degenerate_logprobs,
    parse_llamacpp_native,
    parse_logprobs,
    parse_prompt_logprobs,
)
from specbench.backends.stream_state import StreamState
from specbench.engine.token_logprob import TokenLogprob
from specbench.runs.turns import Turn
from specbench.sampling_params import SamplingParams
from specbench.serve.logprobs_format import (
    TokenTexts,
    chat_logprobs,
    completion_logprobs,
    prompt_logprobs_field,
)

FIXTURES = Path(__file__).parent / "fixtures"


def _json(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def test_vllm_completion_and_prompt_logprobs():
    choice = _json("vllm_completion_logprobs.json")["choices"][0]
    tokens = parse_logprobs(choice)
    assert [(t.token, t.logprob) for t in tokens] == [(" 4", -0.0312), (".", -1.204)]
    assert tokens[1].top == ((".", -1.204), ("\n", -1.51))
    prompt = parse_prompt_logprobs(choice)
    assert prompt[0] is None and len(prompt) == 3
    assert (prompt[1].token, prompt[1].logprob, prompt[1].token_id) == (" is", -7.25, 271)
    assert prompt[1].top == ((" ==", -0.82), (" is", -7.25))  # most likely first, the prompt token included
    assert not is_degenerate_logprobs(tokens)


def test_vllm_streamed_chat_accumulates_and_keeps_clamped_values():
    state = StreamState()
    for line in (FIXTURES / "vllm_chat_logprobs_stream.txt").read_text().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            state.add_event(line[6:], 0.0)
    assert state.text == "Hi there!"
    assert [(t.token, t.logprob) for t in state.logprobs] == [("Hi", -0.25), (" there", -0.5), ("!", -9999.0)]
    assert state.logprobs[2].top == ((".", -0.01), ("?", -5.0))
    assert state.prompt_logprobs is None


def test_llamacpp_native_logprob_and_probability_forms():
    tokens = parse_llamacpp_native(_json("llamacpp_native_completion_probabilities.json"))
    assert [(t.token, t.token_id, t.logprob) for t in tokens] == [(" Paris", 12366, -0.0571), (".", 30, -0.693)]
    probs = parse_llamacpp_native(_json("llamacpp_native_post_sampling_probs.json"))
    assert probs[0].logprob == pytest.approx(math.log(0.5)) and probs[0].top[1] == (" the", pytest.approx(math.log(0.25)))
    assert probs[1].logprob == 0.0  # probability 1 after sampling: a real 0.0, one token only
    assert parse_llamacpp_native({"content": "x"}) is None


def test_zero_logprobs_are_kept_and_flagged():
    recorded = parse_logprobs(_json("llamacpp_logprobs_speculative.json")["choices"][0])  # a real llama-server
    assert recorded[0].logprob != 0.0 and all(t.logprob == 0.0 for t in recorded[1:])
    assert is_degenerate_logprobs(recorded)
    zeros = parse_logprobs(_json("llamacpp_zero_logprobs_chat.json")["choices"][0])
    assert len(zeros) == 6 and {t.logprob for t in zeros} == {0.0} and is_degenerate_logprobs(zeros)


def test_the_degenerate_detector_has_no_false_alarm_on_confident_text():
    confident = [ServerTokenLogprob("a", -1e-4, (("a", -1e-4), ("b", -9.2)))] * 8
    assert not is_degenerate_logprobs(confident)
    one_zero = [ServerTokenLogprob("a", 0.0, ())] + [ServerTokenLogprob("b", -0.7, ())] * 5
    assert not is_degenerate_logprobs(one_zero)
    assert not is_degenerate_logprobs([ServerTokenLogprob("a", 0.0, ())] * 3)  # too short for a verdict
    # two candidates of probability 0.8 each: no distribution gives that
    assert is_degenerate_logprobs([ServerTokenLogprob("a", math.log(0.8), (("a", math.log(0.8)), ("b", math.log(0.8))))])


def test_specbench_serve_shapes_read_back():
    entries = [TokenLogprob(5, -0.5, 1, ((5, -0.5), (7, -1.5))), TokenLogprob(9, -2.0, 3, ((1, -0.25), (5, -1.0)))]
    text_of = TokenTexts(None)
    for shape in (completion_logprobs(entries, text_of, 0), chat_logprobs(entries, text_of)):
        tokens = parse_logprobs({"logprobs": shape})
        assert [(t.token, t.logprob) for t in tokens] == [("token_id:5", -0.5), ("token_id:9", -2.0)]
        assert tokens[1].top == (("token_id:1", -0.25), ("token_id:5", -1.0))
    prompt = parse_prompt_logprobs({"prompt_logprobs": prompt_logprobs_field([None, *entries], text_of)})
    assert prompt[0] is None and (prompt[2].token_id, prompt[2].logprob) == (9, -2.0)


def _turn(prompt: Prompt, params: SamplingParams) -> Turn:
    sample = Sample(sample_id="0", category="t", turns=("q",), reference_answer=None)
    return Turn(sample, 0, prompt, (1, 2), params, None)


def test_requests_ask_for_logprobs_only_when_the_params_do():
    plain = build_request(_turn(Prompt(text="q"), SamplingParams(max_tokens=4)), "m", chat=False)
    assert "logprobs" not in plain.body and "prompt_logprobs" not in plain.body
    params = SamplingParams(max_tokens=4, logprobs=3, prompt_logprobs=1)
    completion = build_request(_turn(Prompt(text="q"), params), "m", chat=False)
    assert completion.path == COMPLETIONS_PATH
    assert (completion.body["logprobs"], completion.body["prompt_logprobs"]) == (3, 1)
    chat = build_request(_turn(Prompt(text="q", messages=(Message("user", "q"),)), params), "m", chat=True)
    assert chat.path == CHAT_PATH and (chat.body["logprobs"], chat.body["top_logprobs"]) == (True, 3)
