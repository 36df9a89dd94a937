"""A reasoning model's answer split at `serve --reasoning-end` (serve/reasoning_split.py), whole and over streamed
deltas, into the OpenAI bodies; and what the structured stage judges of it (gate/structured_run.py: judged_text)."""

from __future__ import annotations

import json

import pytest

from specbench.gate.structured_run import judged_text
from specbench.serve.reasoning_split import ReasoningStream, split_answer
from specbench.serve.responses import ResponseKind

END = "</think>"
TEXT = 'let me see</think>{"a": "x</think>y"}'  # a later marker is content (a JSON string holds it)


def test_whole_answer_split_at_the_first_marker():
    assert split_answer(TEXT, END) == ("let me see", '{"a": "x</think>y"}')
    assert split_answer("still thinking", END) == ("still thinking", "")  # cut while thinking: no content
    assert split_answer("</think>{}", END) == ("", "{}")


@pytest.mark.parametrize("cuts", [(1,), (8, 12), (11, 13, 14, 15), tuple(range(1, len(TEXT)))])
def test_streamed_deltas_concatenate_to_the_whole_split(cuts):
    """However the text is cut into deltas (the marker across two or more of them included), reasoning deltas and
    content deltas concatenate to the whole split, and no part of the marker is streamed as reasoning."""
    edges = (0, *cuts, len(TEXT))
    deltas = [TEXT[a:b] for a, b in zip(edges, edges[1:])]
    stream = ReasoningStream(END)
    parts = [stream.push(d) for d in deltas[:-1]] + [stream.finish(deltas[-1])]
    reasoning, content = "".join(r for r, _ in parts), "".join(c for _, c in parts)
    assert (reasoning, content) == split_answer(TEXT, END)
    assert all("<" not in r for r, _ in parts)


def test_a_held_tail_that_never_became_the_marker_is_reasoning():
    stream = ReasoningStream(END)
    assert stream.push("a </th") == ("a ", "")  # may start the marker: held back
    assert stream.push("ing") == ("</thing", "")
    assert stream.push("x </") == ("x ", "")
    assert stream.finish("") == ("</", "")  # ended inside a marker's start: still thinking
    assert not stream.is_answering


def test_chat_bodies_carry_reasoning_content():
    kind = ResponseKind.new(True, "m")
    message = kind.full("{}", "stop", {}, reasoning="hmm")["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "{}", "reasoning_content": "hmm"}
    assert "reasoning_content" not in kind.full("{}", "stop", {})["choices"][0]["message"]
    delta = json.loads(kind.chunk("{", None, reasoning="hmm")[len("data: "):])["choices"][0]["delta"]
    assert delta == {"content": "{", "reasoning_content": "hmm"}
    delta = json.loads(kind.chunk("", None, reasoning="hmm")[len("data: "):])["choices"][0]["delta"]
    assert delta == {"reasoning_content": "hmm"}


def test_the_structured_stage_judges_the_answer_after_the_reasoning():
    # a server that split the reasoning off sent the answer alone: judged whole, a marker in it is content
    assert judged_text('{"a": "</think>"}', "thinking", None) == ('{"a": "</think>"}', "server")
    assert judged_text('{"a": "</think>"}', "thinking", "think") == ('{"a": "</think>"}', "server")
    # inline reasoning (a server with no reasoning parser) under --reasoning-parser think: after the first marker
    assert judged_text("<think>hm</think>{}", None, "think") == ("{}", "inline")
    assert judged_text("hm, still", None, "think") == ("", "inline")  # cut while thinking: nothing to judge yet
    assert judged_text("hm</think>{}", None, None) == ("hm</think>{}", "")  # no parser: judged whole
    # a splitting server sends no reasoning where there was none (the marker came first): its answer is whole
    assert judged_text("{}", None, "think", is_server_split=True) == ("{}", "")
