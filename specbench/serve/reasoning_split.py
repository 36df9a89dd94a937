"""A reasoning model's chat answer split at its end-of-thinking text (`serve --reasoning-end`), as vLLM's reasoning
parsers do: the text before the marker goes out as `reasoning_content`, the text after it as `content` (the part a
constrained request's grammar governs: grammar/reasoning.py). The marker itself is in neither.

Invariant: the model thinks first (its chat template opens the section), so an answer whose marker never came was cut
(or stopped) while thinking: all of it is reasoning, its content empty. The first marker ends the section; a later
one is content (a JSON string may hold it).
"""

from __future__ import annotations


def split_answer(text: str, end: str) -> tuple[str, str]:
    """(reasoning, content) of a whole answer."""
    at = text.find(end)
    if at < 0:
        return text, ""
    return text[:at], text[at + len(end):]


class ReasoningStream:
    """The same split over streamed text deltas: a tail that may start the marker is held back until the next delta
    settles it, so a marker cut across two deltas is still found and never streamed as reasoning."""

    def __init__(self, end: str) -> None:
        self.end = end
        self.is_answering = False  # the marker was seen: every later delta is content
        self._held = ""  # reasoning not sent yet: a proper prefix of the marker

    def push(self, text: str) -> tuple[str, str]:
        """One delta -> (reasoning, content) that can be sent now (either may be "")."""
        if self.is_answering:
            return "", text
        pending = self._held + text
        reasoning, content = split_answer(pending, self.end)
        if len(reasoning) < len(pending):  # the marker is in `pending`
            self.is_answering, self._held = True, ""
            return reasoning, content
        keep = _marker_prefix_tail(pending, self.end)
        self._held = pending[len(pending) - keep:]
        return pending[:len(pending) - keep], ""

    def finish(self, text: str) -> tuple[str, str]:
        """The last delta: what `push` would send, plus a held tail (the answer ended inside what looked like the
        start of a marker: reasoning)."""
        reasoning, content = self.push(text)
        held, self._held = self._held, ""
        return reasoning + held, content


def _marker_prefix_tail(text: str, end: str) -> int:
    """Length of the longest tail of `text` that is a proper prefix of `end`."""
    for size in range(min(len(end) - 1, len(text)), 0, -1):
        if text.endswith(end[:size]):
            return size
    return 0
