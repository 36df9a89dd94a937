"""An OpenAI chat or completion body's output constraint -> the GrammarSpec its SamplingParams carry: response_format
(json_object, json_schema), tools with tool_choice "required" or a named function, and vLLM's `structured_outputs`
extension (json, regex). A constraint the engine cannot honour is refused (HTTP 400), never ignored."""

from __future__ import annotations

from typing import Any

from specbench.grammar.spec import GrammarSpec


class ConstraintError(ValueError):
    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


def grammar_of(response_format: dict[str, Any] | None, tools: list[dict[str, Any]] | None,
               tool_choice: str | dict[str, Any] | None,
               structured_outputs: dict[str, Any] | None = None) -> GrammarSpec | None:
    """The request's grammar, or None when its output is free text."""
    found = [spec for spec in (_response_format(response_format), _tools(tools, tool_choice),
                               _structured_outputs(structured_outputs)) if spec is not None]
    if len(found) > 1:
        raise ConstraintError("send one output constraint: response_format, tools or structured_outputs",
                              "response_format")
    return found[0] if found else None


def _response_format(response_format: dict[str, Any] | None) -> GrammarSpec | None:
    if response_format is None:
        return None
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return GrammarSpec.json_object()
    if kind == "json_schema":
        body = response_format.get("json_schema")
        schema = body.get("schema") if isinstance(body, dict) else None
        if not isinstance(schema, dict):
            raise ConstraintError("'response_format' json_schema needs {\"json_schema\": {\"name\": ..., \"schema\": "
                                  "{...}}}", "response_format")
        return GrammarSpec.json_schema(schema)
    raise ConstraintError(f"'response_format' type {kind!r} is not supported: text, json_object or json_schema",
                          "response_format")


def _tools(tools: list[dict[str, Any]] | None, tool_choice: str | dict[str, Any] | None) -> GrammarSpec | None:
    if tool_choice == "none" or (not tools and tool_choice is None):
        return None
    if not tools and tool_choice != "auto":
        raise ConstraintError("'tool_choice' needs 'tools'", "tool_choice")
    if tool_choice is None:  # OpenAI's default with tools is "auto"
        raise ConstraintError("'tools' without 'tool_choice' means \"auto\", which is not supported: send "
                              "\"required\" or a named function", "tools")
    if tool_choice == "auto":
        # "auto" lets the model answer in text or call a tool: that needs a tool-call parser, not a grammar
        raise ConstraintError("'tool_choice' \"auto\" is not supported: send \"required\" or a named function",
                              "tool_choice")
    if tool_choice == "required":
        chosen = tools
    elif isinstance(tool_choice, dict) and isinstance(tool_choice.get("function"), dict):
        name = tool_choice["function"].get("name")
        chosen = [t for t in tools if t.get("function", t).get("name") == name]
        if not chosen:
            raise ConstraintError(f"'tool_choice' names {name!r}, which is not among 'tools'", "tool_choice")
    else:
        raise ConstraintError("'tool_choice' must be \"none\", \"required\" or {\"type\": \"function\", "
                              "\"function\": {\"name\": ...}}", "tool_choice")
    try:
        return GrammarSpec.tool_call(chosen)
    except ValueError as err:
        raise ConstraintError(str(err), "tools") from None


def _structured_outputs(options: dict[str, Any] | None) -> GrammarSpec | None:
    if not options:
        return None
    if set(options) - {"json", "regex"} or len(options) != 1:
        raise ConstraintError("'structured_outputs' takes one of: json (a schema), regex", "structured_outputs")
    if "regex" in options:
        if not isinstance(options["regex"], str):
            raise ConstraintError("'structured_outputs' regex must be a string", "structured_outputs")
        return GrammarSpec.regex(options["regex"])
    schema = options["json"]
    if not isinstance(schema, dict):
        raise ConstraintError("'structured_outputs' json must be a schema object", "structured_outputs")
    return GrammarSpec.json_schema(schema)


def tool_calls_message(text: str, call_id: str) -> dict[str, Any] | None:
    """An assistant message carrying the one tool call a tool-call grammar produced, or None when `text` is not one
    (cut by length): then it is returned as content. The arguments are the text the model generated (what a stream's
    argument fragments concatenate to: serve/tool_call_stream.py)."""
    from specbench.serve.tool_call_stream import split_tool_call

    call = split_tool_call(text)
    if call is None:
        return None
    return {"role": "assistant", "content": None, "tool_calls": [{
        "id": call_id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}]}
