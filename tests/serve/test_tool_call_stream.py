"""serve/tool_call_stream.py on its own: a tool-call grammar's text split at every offset streams the same call as the
whole text gives (name first, then argument fragments that concatenate to the whole's arguments; the call's closing
brace never sent); text that is not a call is held back as content."""

from __future__ import annotations

import json

import pytest

from specbench.serve.tool_call_stream import ToolCallStream, split_tool_call

CALLS = [
    '{"name":"get_weather","arguments":{"city":"Paris","unit":"c"}}',
    '{"name":"stop","arguments":{}}',
    '{"name":"q","arguments":{"s":"a}\\"{,","n":[1,{"x":2}]}}',  # brackets and quotes inside strings
    '{ "name" : "say\\"hi" , "arguments" : {"a": 1} }',  # blanks a whitespace-flexible grammar allows
]


@pytest.mark.parametrize("text", CALLS)
def test_split_gives_the_raw_arguments(text):
    call = split_tool_call(text)
    whole = json.loads(text)
    assert call.name == whole["name"] and json.loads(call.arguments) == whole["arguments"]
    assert call.arguments in text


@pytest.mark.parametrize("text", CALLS)
@pytest.mark.parametrize("step", [1, 2, 3, 7, 1000])
def test_streamed_pieces_concatenate_to_the_whole_call(text, step):
    stream = ToolCallStream("call_1")
    entries = [e for i in range(0, len(text), step) for e in stream.push(text[i:i + step])]
    head, *rest = entries
    whole = split_tool_call(text)
    assert head == {"index": 0, "id": "call_1", "type": "function", "function": {"name": whole.name,
                                                                                  "arguments": ""}}
    assert "".join(e["function"]["arguments"] for e in rest) == whole.arguments
    assert stream.is_started


def test_text_that_is_no_call_is_held_back():
    stream = ToolCallStream("call_1")
    assert stream.push("thinking... ") == [] and stream.push('{"nam') == []
    assert not stream.is_started and stream.held_text == 'thinking... {"nam'
    assert split_tool_call('{"name":"get_weather","arguments":{"city":"Pa') is None  # cut by length
