"""What a request is constrained to: one declaration per grammar kind, hashable so SamplingParams stays frozen."""

from __future__ import annotations

import json
from dataclasses import dataclass

from specbench.errors import SpecbenchError

GRAMMAR_KINDS = ("json_object", "json_schema", "regex", "tool_call", "lark")


@dataclass(frozen=True, slots=True)
class GrammarSpec:
    kind: str  # one of GRAMMAR_KINDS
    # json_schema / tool_call: canonical JSON text (the schema; the tools' list); regex: the pattern; lark: the grammar;
    # json_object: "".
    source: str = ""
    # The grammar starts after this text (a reasoning model's "</think>"), matched as its token ids; None: at once.
    starts_after: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in GRAMMAR_KINDS:
            raise SpecbenchError(f"unknown grammar kind {self.kind!r}; supported: {', '.join(GRAMMAR_KINDS)}")

    @classmethod
    def json_object(cls, starts_after: str | None = None) -> GrammarSpec:
        return cls("json_object", "", starts_after)

    @classmethod
    def json_schema(cls, schema: dict, starts_after: str | None = None) -> GrammarSpec:
        return cls("json_schema", json.dumps(schema, sort_keys=True), starts_after)

    @classmethod
    def regex(cls, pattern: str, starts_after: str | None = None) -> GrammarSpec:
        return cls("regex", pattern, starts_after)

    @classmethod
    def tool_call(cls, tools: list[dict], starts_after: str | None = None) -> GrammarSpec:
        """One call of one of `tools` (OpenAI's [{"type": "function", "function": {name, parameters}}] or the bare
        functions), as {"name": ..., "arguments": {...}}."""
        functions = [t.get("function", t) for t in tools]
        if not functions or any(not isinstance(f.get("name"), str) for f in functions):
            raise SpecbenchError("a tool-call grammar needs at least one tool, each with a string name")
        return cls("tool_call", json.dumps(functions, sort_keys=True), starts_after)

    def json_schema_of(self) -> dict | None:
        """The JSON schema outputs must conform to (json_object: any object), None for regex and lark grammars."""
        if self.kind == "json_object":
            return {"type": "object"}
        if self.kind == "json_schema":
            return json.loads(self.source)
        if self.kind == "tool_call":
            return tool_call_schema(json.loads(self.source))
        return None


def tool_call_schema(functions: list[dict]) -> dict:
    """{"name": one tool's name, "arguments": that tool's parameters}: one alternative per tool, so the arguments
    follow the named tool's schema."""
    return {"anyOf": [{
        "type": "object",
        "properties": {"name": {"const": f["name"]},
                       "arguments": f.get("parameters") or {"type": "object"}},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    } for f in functions]}
