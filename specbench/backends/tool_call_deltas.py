"""Tool calls streamed as OpenAI's `delta.tool_calls` (vLLM, SGLang and `specbench serve` with tools and a forced
tool_choice), reassembled: each entry names its call by `index`; the first for a call carries its id, type and
function.name, later ones function.arguments fragments to concatenate."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass
class ToolCallParts:
    """One call as far as it streamed."""

    call_id: str = ""
    name: str = ""
    arguments: str = ""  # the fragments so far, concatenated

    def as_text(self) -> str:
        """The call in the tool-call grammar's shape ({"name", "arguments"}, grammar/spec.py), as a server that
        returns it as content would have written it: what the JSON workload judges. Arguments that are not JSON
        (cut by length) are kept as their raw text, which then fails to parse as the whole would."""
        try:
            arguments = json.dumps(json.loads(self.arguments), separators=(",", ":"))
        except json.JSONDecodeError:
            arguments = self.arguments
        return f'{{"name":{json.dumps(self.name)},"arguments":{arguments}}}'


def merge_tool_call_deltas(calls: dict[int, ToolCallParts], delta: dict[str, Any]) -> str:
    """Fold one streamed delta's `tool_calls` entries into `calls` (by index); the text they carried (names and
    argument fragments: output the model generated, for token counts and timing), "" when none."""
    entries = delta.get("tool_calls")
    if not isinstance(entries, list):
        return ""
    carried = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        index = entry.get("index") if isinstance(entry.get("index"), int) else len(calls)
        call = calls.setdefault(index, ToolCallParts())
        if isinstance(entry.get("id"), str):
            call.call_id = entry["id"]
        function = entry.get("function")
        if isinstance(function, dict):
            if isinstance(function.get("name"), str):
                call.name += function["name"]
                carried.append(function["name"])
            if isinstance(function.get("arguments"), str):
                call.arguments += function["arguments"]
                carried.append(function["arguments"])
    return "".join(carried)
