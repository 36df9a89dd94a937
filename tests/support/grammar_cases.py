"""Grammars a tiny random model can finish (bounded strings, enums, small integers), and the check every constrained
output must pass: complete and conformant when it stopped, a prefix the grammar allows when cut by length."""

from __future__ import annotations

from specbench.grammar.conformance import judge
from specbench.grammar.library import GrammarLibrary
from specbench.grammar.spec import GrammarSpec

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
    """Why a RequestOutput breaks its grammar, or None: stopped -> judged complete and conformant on its text; cut
    by length -> every token a prefix the grammar allows (a fresh matcher, not the engine's)."""
    if output.finish_reason == "length":
        matcher = library.matcher(spec)
        num_valid = matcher.validate_tokens(list(output.output_token_ids))
        return None if num_valid == len(output.output_token_ids) else f"token {num_valid} refused: {output.text!r}"
    verdict = judge(spec, output.text)
    return None if verdict.is_conformant else f"{verdict.error}: {output.text!r}"
