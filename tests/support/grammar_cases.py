"""Grammars a tiny random model can finish (bounded strings, enums, small integers), and the check every constrained
output must pass: complete and conformant when it stopped, a prefix the grammar allows when cut by length."""

from __future__ import annotations

from specbench.grammar.conformance import judge
from specbench.grammar.library import GrammarLibrary
from specbench.grammar.spec import GrammarSpec
from specbench.grammar.state import GrammarState

BOUNDED_SCHEMAS = {
    "flat": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 6}, "role": {"enum": ["admin", "user", "guest"]},
        "active": {"type": "boolean"}}, "required": ["name", "role", "active"], "additionalProperties": False},
    "nested": {"type": "object", "properties": {
        "user": {"type": "object", "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 99},
                                                  "tier": {"enum": ["free", "pro"]}},
                 "required": ["id", "tier"], "additionalProperties": False},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}},
        "required": ["user", "tags"], "additionalProperties": False},
}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]}, "unit": {"enum": ["c", "f"]}},
    "required": ["city", "unit"], "additionalProperties": False}}},
         {"type": "function", "function": {"name": "stop", "parameters": {
             "type": "object", "properties": {}, "additionalProperties": False}}}]


def bounded_specs() -> dict[str, GrammarSpec]:
    specs = {name: GrammarSpec.json_schema(schema) for name, schema in BOUNDED_SCHEMAS.items()}
    specs["tool"] = GrammarSpec.tool_call(TOOLS)
    specs["regex"] = GrammarSpec.regex(r"(yes|no), [0-9]{1,3}")
    return specs


def output_problem(library: GrammarLibrary, spec: GrammarSpec, output) -> str | None:
    """Why a RequestOutput breaks its grammar, or None: stopped -> its text after the reasoning marker (if any) judged
    complete and conformant; cut by length -> every token one a fresh grammar state allows."""
    if output.finish_reason == "length":
        marker = library.marker_token_ids(spec.starts_after) if spec.starts_after else ()
        state = GrammarState(library.matcher(spec), marker, frozenset(), library.llg.torch)
        for i, token in enumerate(output.output_token_ids):
            if not state.consume(token):
                return f"token {i} refused: {output.text!r}"
        return None
    text = output.text
    if spec.starts_after:
        if spec.starts_after not in text:
            return f"stopped before the reasoning marker: {text!r}"
        text = text.split(spec.starts_after, 1)[1]
    verdict = judge(spec, text)
    return None if verdict.is_conformant else f"{verdict.error}: {output.text!r}"
