"""Reading JSON a user supplied (model configs, manifests, prompt rows): every way it can be bad is one SpecbenchError.

`json.loads` raises more than JSONDecodeError on hostile text: RecursionError for deeply nested arrays/objects, a
plain ValueError for an integer of more than 4300 digits. Those are the user's input, not bugs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from pydantic import ValidationError


def parse_json(text: str, where: str) -> Any:
    """`text` parsed; `where` names it in the error ("config.json", "prompts.jsonl line 3")."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise SpecbenchError(f"{where}: malformed JSON: {err.msg} (line {err.lineno}, column {err.colno})") from None
    except (RecursionError, ValueError) as err:  # nested too deeply; an integer too long to convert
        raise SpecbenchError(f"{where}: malformed JSON: {json_problem(err)}") from None


def json_problem(err: Exception) -> str:
    """One line for an exception reading or parsing JSON raised (OSError, or json.loads' on bad text)."""
    if isinstance(err, OSError):
        return err.strerror or str(err)
    if isinstance(err, RecursionError):
        return "nested too deeply"
    if isinstance(err, json.JSONDecodeError):
        return f"{err.msg} (line {err.lineno}, column {err.colno})"
    return " ".join(str(err).split())


def read_json_file(path: Path, what: str = "JSON file") -> Any:
    """The JSON value in `path`; `what` says what the file is for ("model config")."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # a leading byte-order mark is no JSON: skipped
    except UnicodeDecodeError as err:
        raise SpecbenchError(f"{what} {path} is not UTF-8 text: {err.reason}") from None
    except OSError as err:
        raise SpecbenchError(f"cannot read {what} {path}: {err.strerror or err}") from None
    return parse_json(text, f"{what} {path}")


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """As read_json_file, refusing anything but a JSON object at the top."""
    value = read_json_file(path, what)
    if not isinstance(value, dict):
        raise SpecbenchError(f"{what} {path} must hold a JSON object, got a JSON {json_kind(value)}")
    return value


def json_kind(value: Any) -> str:
    """The JSON name of a parsed value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "array", str: "string", int: "number", float: "number"}.get(type(value), "value")


def first_error(err: ValidationError, prefix: str = "") -> str:
    """"field 'a.b': <problem>, got <value>" for the first error of a pydantic validation (one line); `prefix`
    goes before the field's path (the validated object's own place in the document)."""
    first = err.errors(include_url=False)[0]
    where = prefix + (".".join(str(part) for part in first["loc"]) or "(top level)")
    if first["type"] == "missing":
        return f"is missing required field {where!r}"
    value = repr(first.get("input"))
    value = value if len(value) <= 60 else value[:57] + "..."
    return f"field {where!r}: {' '.join(first['msg'].split())}, got {value}"
