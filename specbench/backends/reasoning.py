"""Split one streamed delta into reasoning and answer text (reasoning models over HTTP).

vLLM (`--reasoning-parser`) and SGLang stream a model's thinking as `delta.reasoning_content`; newer vLLM and
other OpenAI-compatible servers name it `delta.reasoning`. Both are output the model generated: they count for
TTFT and ITL like content does, but only `content` is the answer (scored, and sent back in later turns).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

REASONING_KEYS = ("reasoning_content", "reasoning")


@dataclass(frozen=True, slots=True)
class DeltaText:
    reasoning: str  # "" when the delta carried no reasoning
    answer: str  # "" when the delta carried no content


def split_delta(choice: dict[str, Any]) -> DeltaText:
    """`choice`: one streamed choice; chat streams carry a `delta`, completion streams `text` (answer only)."""
    delta = choice.get("delta")
    if not isinstance(delta, dict):
        text = choice.get("text")
        return DeltaText("", text if isinstance(text, str) else "")
    content = delta.get("content")
    reasoning = next((delta[k] for k in REASONING_KEYS if isinstance(delta.get(k), str)), "")
    return DeltaText(reasoning, content if isinstance(content, str) else "")


THINK_START, THINK_END = "<think>", "</think>"
REASONING_PARSERS = ("think",)  # --reasoning-parser: split <think>...</think> out of the completion text


def split_think(text: str) -> tuple[str | None, str]:
    """(reasoning, answer) of a completion whose reasoning is inline, as DeepSeek-R1 / Qwen3 write it: text up to
    `</think>` is reasoning (a leading `<think>` dropped); an unclosed `<think>` (cut at max_tokens) is all
    reasoning. (None, text) when the text has neither tag."""
    if THINK_END in text:
        reasoning, answer = text.split(THINK_END, 1)
        return reasoning.strip().removeprefix(THINK_START).strip(), answer.lstrip()
    stripped = text.lstrip()
    if stripped.startswith(THINK_START):
        return stripped.removeprefix(THINK_START).strip(), ""
    return None, text
