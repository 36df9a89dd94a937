"""Parse a user prompt file: JSONL rows (`prompt` or chat `messages`) or ShareGPT JSON (`conversations`).

Every malformed row is one SpecbenchError naming the file, the line and the field. Rows are bounded before anything
is tokenised: a JSONL line is read at most MAX_ROW_BYTES (workloads/base.py) at a time, and a row's text past it is
refused (one 100 MB line would otherwise be decoded, parsed and tokenised whole: gigabytes).
"""

from __future__ import annotations

import codecs
import hashlib
import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from specbench.errors import SpecbenchError
from specbench.json_file import json_problem
from specbench.workloads import base

DEFAULT_CATEGORY = "file"
MAX_TOKENS = 2**24  # far above any model's context; a larger per-row max_tokens is a typo or hostile
ROLES = ("system", "user", "assistant")
SHAREGPT_ROLES = {"system": "system", "human": "user", "user": "user", "gpt": "assistant",
                  "assistant": "assistant", "chatgpt": "assistant", "bard": "assistant", "bing": "assistant"}


@dataclass(frozen=True, slots=True)
class PromptRow:
    row_id: str  # the row's `id` when given, else its 0-based index in the file
    line: int  # 1-based line where the row starts
    system: str | None
    user_turns: tuple[str, ...]  # replayed in order; the file's assistant messages are replaced by the model's
    is_raw_prompt: bool  # a `prompt` row (plain text), not a conversation
    max_tokens: int | None
    category: str
    temperature: float | None


class FieldError(ValueError):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"field {field!r}: {problem}")


def read_prompt_file(path: Path) -> tuple[list[PromptRow], str]:
    """(rows, the file's sha256). JSONL is read line by line, each line bounded; a JSON array (ShareGPT) whole."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        head = f.read(4096)
        bom = codecs.BOM_UTF8 if head.startswith(codecs.BOM_UTF8) else b""  # Windows editors write one: no JSON
        digest.update(bom)
        f.seek(len(bom))
        if head[len(bom):].lstrip().startswith(b"["):
            raw = f.read()
            digest.update(raw)
            return parse_prompt_file(path, raw), digest.hexdigest()
        entries = _jsonl_lines(path, f, digest)
    return _rows(path, entries), digest.hexdigest()


def parse_prompt_file(path: Path, raw: bytes) -> list[PromptRow]:
    try:
        text = raw.decode("utf-8-sig")  # a leading byte-order mark is no JSON: skipped
    except UnicodeDecodeError as err:
        raise SpecbenchError(f"{path} is not UTF-8: {err}") from None
    entries = _json_array(path, text) if text.lstrip().startswith("[") else _jsonl(path, text)
    return _rows(path, entries)


def _rows(path: Path, entries: list[tuple[int, Any]]) -> list[PromptRow]:
    rows = []
    for index, (line, entry) in enumerate(entries):
        try:
            rows.append(_row(entry, index, line))
        except FieldError as err:
            raise SpecbenchError(f"malformed row in {path} line {line}: {err}") from None
    if not rows:
        raise SpecbenchError(f"{path} holds no rows")
    ids = [r.row_id for r in rows]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        line = next(r.line for r in rows if r.row_id == dup)
        raise SpecbenchError(f"malformed row in {path} line {line}: field 'id': {dup!r} is used by several rows")
    return rows


def _jsonl_lines(path: Path, f: BinaryIO, digest) -> list[tuple[int, Any]]:
    """JSONL rows read one bounded line at a time (`digest` fed every byte): a line past MAX_ROW_BYTES is refused
    after reading MAX_ROW_BYTES + 1 of its bytes, never whole."""
    entries = []
    for lineno in itertools.count(1):
        raw = f.readline(base.MAX_ROW_BYTES + 1)
        if not raw:
            return entries
        digest.update(raw)
        if len(raw) > base.MAX_ROW_BYTES:
            raise SpecbenchError(f"{path} line {lineno} is longer than {base.MAX_ROW_BYTES} bytes: a row holds one "
                                 f"prompt (at most {base.MAX_ROW_BYTES} bytes of text)")
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise SpecbenchError(f"{path} is not UTF-8: line {lineno}: {err}") from None
        entries += _jsonl_entry(path, line, lineno)


def _jsonl(path: Path, text: str) -> list[tuple[int, Any]]:
    entries = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        entries += _jsonl_entry(path, line, lineno)
    return entries


def _jsonl_entry(path: Path, line: str, lineno: int) -> list[tuple[int, Any]]:
    """[(lineno, the line's JSON)], [] for a blank line."""
    if not line.strip():
        return []
    try:
        return [(lineno, json.loads(line))]
    except json.JSONDecodeError as err:
        raise SpecbenchError(f"malformed JSON in {path} line {lineno}: {err.msg}") from None
    except (RecursionError, ValueError) as err:  # nested too deeply; an integer too long to convert
        raise SpecbenchError(f"malformed JSON in {path} line {lineno}: {json_problem(err)}") from None


def _json_array(path: Path, text: str) -> list[tuple[int, Any]]:
    """Elements of a top-level JSON array with the line each one starts on (ShareGPT files)."""
    decoder = json.JSONDecoder()
    pos = text.index("[") + 1
    entries = []
    while True:
        pos = _skip_space(text, pos)
        if pos < len(text) and text[pos] == "]":
            return entries
        line = text.count("\n", 0, pos) + 1
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            raise SpecbenchError(f"malformed JSON in {path} line {err.lineno}: {err.msg}") from None
        except (RecursionError, ValueError) as err:
            raise SpecbenchError(f"malformed JSON in {path} line {line}: {json_problem(err)}") from None
        entries.append((line, value))
        pos = _skip_space(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos >= len(text) or text[pos] != "]":
            line = text.count("\n", 0, pos) + 1
            raise SpecbenchError(f"malformed JSON in {path} line {line}: expected ',' or ']' between rows")


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _row(entry: Any, index: int, line: int) -> PromptRow:
    if not isinstance(entry, dict):
        raise FieldError("(row)", f"expected a JSON object, got {type(entry).__name__}")
    kinds = [k for k in ("prompt", "messages", "conversations") if k in entry]
    if len(kinds) != 1:
        found = f"found {', '.join(kinds)}" if kinds else "found none"
        raise FieldError("prompt", f"a row needs exactly one of 'prompt', 'messages', 'conversations' ({found})")
    kind = kinds[0]
    system, turns = None, ()
    if kind == "prompt":
        prompt = entry["prompt"]
        if not isinstance(prompt, str) or not prompt:
            raise FieldError("prompt", f"should be a non-empty string, got {_kind(prompt)}")
        turns = (prompt,)
    else:
        system, turns = _conversation(entry[kind], kind)
    num_bytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in (*turns, system or ""))
    if num_bytes > base.MAX_ROW_BYTES:  # checked before anything is tokenised (ShareGPT rows are read whole)
        raise FieldError(kind, f"holds {num_bytes} bytes of text: more than the {base.MAX_ROW_BYTES} a row may "
                               "hold")
    return PromptRow(
        row_id=_row_id(entry, index),
        line=line,
        system=system,
        user_turns=turns,
        is_raw_prompt=kind == "prompt",
        max_tokens=_max_tokens(entry),
        category=_category(entry),
        temperature=_temperature(entry),
    )


def _conversation(messages: Any, kind: str) -> tuple[str | None, tuple[str, ...]]:
    """(system message, user turns). `messages`: {role, content}; ShareGPT `conversations`: {from, value}."""
    role_key, text_key = ("role", "content") if kind == "messages" else ("from", "value")
    if not isinstance(messages, list) or not messages:
        raise FieldError(kind, f"should be a non-empty list, got {_kind(messages)}")
    system, turns = None, []
    for i, message in enumerate(messages):
        where = f"{kind}[{i}]"
        if not isinstance(message, Mapping):
            raise FieldError(where, f"should be an object, got {_kind(message)}")
        role = message.get(role_key)
        roles = ROLES if kind == "messages" else tuple(SHAREGPT_ROLES)
        if role not in roles:
            raise FieldError(f"{where}.{role_key}", f"should be one of {', '.join(roles)}, got {_short(role)}")
        role = role if kind == "messages" else SHAREGPT_ROLES[role]
        content = message.get(text_key)
        if not isinstance(content, str):
            raise FieldError(f"{where}.{text_key}", f"should be a string, got {_kind(content)}")
        if role == "system":
            if i != 0:
                raise FieldError(f"{where}.{role_key}", "a system message may only come first")
            system = content
        elif role == "user":
            if not content:
                raise FieldError(f"{where}.{text_key}", "a user message may not be empty")
            turns.append(content)
    if not turns:
        raise FieldError(kind, "holds no user message")
    return system, tuple(turns)


def _row_id(entry: Mapping[str, Any], index: int) -> str:
    value = entry.get("id", entry.get("question_id"))
    if value is None:
        return str(index)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise FieldError("id", f"should be a string or integer, got {_kind(value)}")
    return str(value)


def _max_tokens(entry: Mapping[str, Any]) -> int | None:
    value = entry.get("max_tokens")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKENS:
        raise FieldError("max_tokens", f"should be an integer >= 1 (at most {MAX_TOKENS}), got {_short(value)}")
    return value


def _category(entry: Mapping[str, Any]) -> str:
    value = entry.get("category", DEFAULT_CATEGORY)
    if not isinstance(value, str) or not value:
        raise FieldError("category", f"should be a non-empty string, got {_short(value)}")
    return value


def _temperature(entry: Mapping[str, Any]) -> float | None:
    value = entry.get("temperature")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise FieldError("temperature", f"should be a finite number >= 0, got {_short(value)}")
    return float(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__
