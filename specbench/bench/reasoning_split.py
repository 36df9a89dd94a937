"""--reasoning-parser for completions whose reasoning is inline text (the embedded engine, or a server run without
its own reasoning parser): the answer is scored and sent back in later turns, the reasoning stored apart."""

from __future__ import annotations

import dataclasses

from specbench.backends.reasoning import split_think
from specbench.runs.finished_turn import FinishedTurn


def answer_text(completion: str, parser: str | None) -> str:
    return completion if parser is None else split_think(completion)[1]


def split_reasoning(item: FinishedTurn, parser: str | None) -> FinishedTurn:
    """`item` with its text split; unchanged without a parser, without text, or when the server already sent the
    reasoning apart (reasoning deltas)."""
    if parser is None or item.output.text is None or item.reasoning_text is not None:
        return item
    reasoning, answer = split_think(item.output.text)
    output = dataclasses.replace(item.output, text=answer)
    return dataclasses.replace(item, output=output, reasoning_text=reasoning)
