"""How each server is sent a request's output constraint (its GrammarSpec), keyed by server adapter name
(server_adapters.py; "openai" when none was detected). Fields from each server's documentation:

- OpenAI / specbench serve: `response_format` {"type": "json_object"} or {"type": "json_schema", "json_schema":
  {"name", "schema", "strict"}}; tools with `tool_choice` "required"; regex: specbench's `structured_outputs`.
- vLLM: the same response_format; regex and the rest as `structured_outputs` {"regex": ...} (v0.12 removed the older
  `guided_regex` / `guided_json` fields; docs.vllm.ai "Structured Outputs").
- SGLang: the same response_format; regex as its `regex` sampling field.
- llama.cpp (llama-server): its native `json_schema` field (response_format json_schema was refused alongside an
  implicit grammar in some builds, llama.cpp #11847); tool calls as the same {"name", "arguments"} schema, since
  llama-server's tools need --jinja; regex has no field (GBNF only): refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from specbench.errors import SpecbenchError
from specbench.grammar.spec import GrammarSpec


def _openai(spec: GrammarSpec, regex_field: Callable[[str], dict[str, Any]] | None) -> dict[str, Any]:
    if spec.kind == "json_object":
        return {"response_format": {"type": "json_object"}}
    if spec.kind == "json_schema":
        return {"response_format": {"type": "json_schema", "json_schema": {
            "name": "workload_schema", "schema": json.loads(spec.source), "strict": True}}}
    if spec.kind == "tool_call":
        tools = [{"type": "function", "function": f} for f in json.loads(spec.source)]
        return {"tools": tools, "tool_choice": "required"}
    if spec.kind == "regex" and regex_field is not None:
        return regex_field(spec.source)
    raise SpecbenchError(f"a {spec.kind} constraint has no field on this server")


def _llamacpp(spec: GrammarSpec) -> dict[str, Any]:
    schema = spec.json_schema_of()
    if schema is None:
        raise SpecbenchError(f"llama-server takes no {spec.kind} constraint (only JSON schemas or GBNF grammars)")
    return {"json_schema": schema}


CONSTRAINT_DIALECTS: dict[str, Callable[[GrammarSpec], dict[str, Any]]] = {
    "openai": lambda spec: _openai(spec, None),
    "specbench": lambda spec: _openai(spec, lambda pattern: {"structured_outputs": {"regex": pattern}}),
    "vllm": lambda spec: _openai(spec, lambda pattern: {"structured_outputs": {"regex": pattern}}),
    "sglang": lambda spec: _openai(spec, lambda pattern: {"regex": pattern}),
    "llamacpp": _llamacpp,
}


def constraint_fields(spec: GrammarSpec | None, dialect: str = "openai") -> dict[str, Any]:
    """The body fields that send `spec` to a server speaking `dialect` ({} without a constraint)."""
    if spec is None:
        return {}
    if spec.starts_after is not None:
        raise SpecbenchError("a constraint after a reasoning marker is set on the server (its reasoning parser), "
                             "not per request")
    return CONSTRAINT_DIALECTS.get(dialect, CONSTRAINT_DIALECTS["openai"])(spec)
