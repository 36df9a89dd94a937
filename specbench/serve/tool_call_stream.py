"""A tool-call grammar's output (`{"name": ..., "arguments": {...}}`, grammar/spec.py tool_call_schema) as OpenAI's
tool call: whole (`split_tool_call`, message.tool_calls) or streamed as `delta.tool_calls` (`ToolCallStream`): first
the call's index, id, type and function.name with empty arguments, then function.arguments fragments, the raw text
the model generated, so that the fragments concatenate to the whole response's arguments exactly.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# The call's head up to its arguments' value; the grammar writes it compact, the pattern allows blanks as JSON does.
_HEAD = re.compile(r'\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"arguments"\s*:\s*')


@dataclass(frozen=True, slots=True)
class ToolCallText:
    name: str
    arguments: str  # the arguments' JSON text as generated


class _ValueEnd:
    """Where a JSON value ends, fed a character at a time: after the bracket closing its outermost container, or at
    the `,` / `}` after a scalar (strings and escapes skipped)."""

    def __init__(self) -> None:
        self.depth = 0
        self.is_in_string = False
        self.is_escaped = False

    def feed(self, text: str) -> int | None:
        """The length of `text` that still belongs to the value, when the value ends inside it; else None."""
        for i, ch in enumerate(text):
            if self.is_in_string:
                if self.is_escaped:
                    self.is_escaped = False
                elif ch == "\\":
                    self.is_escaped = True
                elif ch == '"':
                    self.is_in_string = False
            elif ch == '"':
                self.is_in_string = True
            elif ch in "{[":
                self.depth += 1
            elif ch in "}]":
                if self.depth == 0:
                    return i  # the call's own closing brace after a scalar
                self.depth -= 1
                if self.depth == 0:
                    return i + 1
            elif ch == "," and self.depth == 0:
                return i
        return None


def split_tool_call(text: str) -> ToolCallText | None:
    """The call in a complete tool-call grammar output, or None when `text` is not one (cut by length, say)."""
    try:
        call = json.loads(text)
    except json.JSONDecodeError:
        return None
    head = _HEAD.match(text)
    if not isinstance(call, dict) or not isinstance(call.get("name"), str) or head is None:
        return None
    end = _ValueEnd().feed(text[head.end():])
    if end is None:
        return None
    return ToolCallText(call["name"], text[head.end(): head.end() + end])


class ToolCallStream:
    """One streamed response's tool call: text deltas in, `delta.tool_calls` entries out. Nothing is sent before the
    call's name is complete; the closing brace after the arguments is never sent."""

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id
        self._text = ""
        self._arguments_start: int | None = None  # offset of the arguments' value in the text, once the head is read
        self._num_sent = 0  # offset of the text sent so far (arguments)
        self._end = _ValueEnd()
        self._is_done = False  # the arguments' value ended

    @property
    def is_started(self) -> bool:
        """The call's head went out: the response is a tool call from here on."""
        return self._arguments_start is not None

    @property
    def held_text(self) -> str:
        """Everything pushed (the content to send instead when no call ever started)."""
        return self._text

    def push(self, delta: str) -> list[dict[str, Any]]:
        """The `delta.tool_calls` entries the new text completes (maybe none)."""
        self._text += delta
        entries = []
        if self._arguments_start is None:
            head = _HEAD.match(self._text)
            if head is None:
                return []
            self._arguments_start = self._num_sent = head.end()
            entries.append({"index": 0, "id": self.call_id, "type": "function",
                            "function": {"name": json.loads(head.group(1)), "arguments": ""}})
        if self._num_sent == self._arguments_start:  # blanks before the value (a flexible grammar's) are no part of it
            self._num_sent = self._arguments_start = len(self._text) - len(self._text[self._num_sent:].lstrip())
        if not self._is_done and len(self._text) > self._num_sent:
            new = self._text[self._num_sent:]
            end = self._end.feed(new)
            if end is not None:
                self._is_done = True
                new = new[:end]
            self._num_sent += len(new)
            if new:
                entries.append({"index": 0, "function": {"arguments": new}})
        else:
            self._num_sent = len(self._text)
        return entries
