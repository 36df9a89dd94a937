"""Incremental text of a streaming request: every delta is a prefix extension of the final text.

Held back until later tokens settle them: a trailing partial UTF-8 character (decoded as U+FFFD) and a tail that
could start a stop string (the final text is cut at the first stop string, as the engine's is).
"""

from __future__ import annotations

from collections.abc import Sequence

_REPLACEMENT = "\ufffd"


class TextStreamer:
    def __init__(self, tokenizer, stop: Sequence[str]) -> None:
        self.tokenizer = tokenizer
        self.stop = tuple(s for s in stop if s)
        self.token_ids: list[int] = []
        self.sent = ""  # text already streamed

    def push(self, token_ids: Sequence[int]) -> str:
        """Tokens committed by one engine step -> the text that can be sent now (maybe "")."""
        self.token_ids.extend(token_ids)
        text = self.tokenizer.decode(self.token_ids, skip_special_tokens=True)
        cuts = [text.find(s) for s in self.stop if s in text]
        if cuts:
            return self._advance(text[: min(cuts)])
        text = text.rstrip(_REPLACEMENT)  # a partial character may still complete a stop string's prefix
        return self._advance(text[: len(text) - self._held_back(text)])

    def finish(self, final_text: str) -> str:
        """The rest of the request's final text."""
        return self._advance(final_text)

    def _held_back(self, text: str) -> int:
        """Length of the longest tail of `text` that is a proper prefix of a stop string."""
        longest = 0
        for stop in self.stop:
            for size in range(min(len(stop) - 1, len(text)), longest, -1):
                if text.endswith(stop[:size]):
                    longest = size
                    break
        return longest

    def _advance(self, text: str) -> str:
        if not text.startswith(self.sent):
            return ""  # decoding revised already-sent text (rare byte merges): wait for the final text
        delta = text[len(self.sent) :]
        self.sent = text
        return delta
