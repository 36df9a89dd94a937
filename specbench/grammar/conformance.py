"""Whether an output satisfies its grammar: valid JSON, conformant to the schema (json kinds), or a full match of the
pattern (regex). Judged on the text, as a client would, never by the engine's own matcher."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from specbench.grammar.spec import GrammarSpec


@dataclass(frozen=True, slots=True)
class Conformance:
    is_valid: bool  # JSON kinds: parses as JSON; regex: always True (validity is the match)
    is_conformant: bool  # conforms to the schema (json kinds) or fully matches the pattern (regex)
    error: str = ""  # why not, in one line


def judge(spec: GrammarSpec, text: str) -> Conformance:
    if spec.kind == "regex":
        is_match = re.fullmatch(spec.source, text) is not None
        return Conformance(True, is_match, "" if is_match else "does not match the pattern")
    if spec.kind == "lark":
        return Conformance(True, True, "lark grammars are judged by the engine only")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        return Conformance(False, False, f"invalid JSON: {e.msg} at {e.pos}")
    try:
        import jsonschema
    except ImportError:  # the `grammar` extra brings it; without it only validity is judged
        return Conformance(True, True, "jsonschema missing: validity only")
    try:
        jsonschema.validate(value, spec.json_schema_of())
    except jsonschema.ValidationError as e:
        return Conformance(True, False, f"schema: {e.message}"[:200])
    return Conformance(True, True)
