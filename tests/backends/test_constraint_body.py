"""How a request's output constraint is sent to each server (backends/constraint_body.py), and what `specbench
serve` makes of the OpenAI fields (serve/structured_request.py): the two directions agree."""

from __future__ import annotations

import pytest

from specbench.backends.constraint_body import constraint_fields
from specbench.errors import SpecbenchError
from specbench.grammar.spec import GrammarSpec
from specbench.serve.structured_request import ConstraintError, grammar_of

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": SCHEMA}}]


@pytest.mark.parametrize("spec", [GrammarSpec.json_object(), GrammarSpec.json_schema(SCHEMA),
                                  GrammarSpec.tool_call(TOOLS), GrammarSpec.regex("[0-9]+")])
def test_specbench_reads_back_what_it_is_sent(spec):
    body = constraint_fields(spec, "specbench")
    parsed = grammar_of(body.get("response_format"), body.get("tools"), body.get("tool_choice"),
                        body.get("structured_outputs"))
    assert parsed == spec


def test_each_server_gets_its_own_fields():
    regex = GrammarSpec.regex("[0-9]+")
    assert constraint_fields(regex, "vllm") == {"structured_outputs": {"regex": "[0-9]+"}}
    assert constraint_fields(regex, "sglang") == {"regex": "[0-9]+"}
    assert constraint_fields(GrammarSpec.json_schema(SCHEMA), "llamacpp") == {"json_schema": SCHEMA}
    tool = constraint_fields(GrammarSpec.tool_call(TOOLS), "llamacpp")["json_schema"]
    assert tool["anyOf"][0]["properties"]["name"] == {"const": "f"}
    assert constraint_fields(GrammarSpec.json_schema(SCHEMA), "vllm")["response_format"]["type"] == "json_schema"
    with pytest.raises(SpecbenchError, match="llama-server takes no regex"):
        constraint_fields(regex, "llamacpp")
    with pytest.raises(SpecbenchError, match="no field"):
        constraint_fields(regex, "openai")
    assert constraint_fields(None, "vllm") == {}


def test_openai_fields_that_cannot_be_honoured_are_refused():
    with pytest.raises(ConstraintError, match="auto"):
        grammar_of(None, TOOLS, "auto")
    with pytest.raises(ConstraintError, match="not among"):
        grammar_of(None, TOOLS, {"type": "function", "function": {"name": "g"}})
    assert grammar_of({"type": "text"}, None, None) is None
    assert grammar_of(None, TOOLS, "none") is None
