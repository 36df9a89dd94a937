"""Incremental text of a streaming request: every delta is a prefix extension of the final text.

Each step decodes only a short window of tokens (amortised O(new tokens), never the whole output): the text of
tokens [prefix_offset, read_offset) was already produced, so decoding [prefix_offset, end) and dropping that
prefix yields the new text with the context a tokenizer needs (SentencePiece's leading-space rule, byte-level
merges). Held back until later tokens settle them: tokens ending in a partial UTF-8 character (decoded as U+FFFD)
and a tail that could start a stop string (the final text is cut at the first stop string, as the engine's is).
"""

from __future__ import annotations

from collections.abc import Sequence

_REPLACEMENT = "\ufffd"


class TextStreamer:
    def __init__(self, tokenizer, stop: Sequence[str]) -> None:
        self.tokenizer = tokenizer
        self.stop = tuple(s for s in stop if s)
        self.token_ids: list[int] = []
        self._prefix_offset = 0  # tokens[prefix_offset:read_offset] decode to text already taken
        self._read_offset = 0
        self._unsent = ""  # decoded text held back: a tail that may start a stop string
        self._sent: list[str] = []  # deltas streamed so far
        self._is_stopped = False  # a stop string was reached: nothing more is streamed

    def push(self, token_ids: Sequence[int]) -> str:
        """Tokens committed by one engine step -> the text that can be sent now (maybe "")."""
        self.token_ids.extend(token_ids)
        if self._is_stopped:
            return ""
        self._unsent += self._decode_new()
        cuts = [self._unsent.find(s) for s in self.stop if s in self._unsent]
        if cuts:
            self._is_stopped = True
            return self._send(self._unsent[: min(cuts)], "")
        keep = self._held_back(self._unsent)
        return self._send(self._unsent[: len(self._unsent) - keep], self._unsent[len(self._unsent) - keep :])

    def finish(self, final_text: str) -> str:
        """The rest of the request's final text."""
        sent = "".join(self._sent)
        if not final_text.startswith(sent):
            return ""  # the window decode disagreed with the full decode (should not happen): cannot take it back
        return self._send(final_text[len(sent) :], "")

    def _decode_new(self) -> str:
        window = self.token_ids[self._prefix_offset :]
        num_prefix = self._read_offset - self._prefix_offset
        prefix_text = self.tokenizer.decode(window[:num_prefix], skip_special_tokens=True) if num_prefix else ""
        text = self.tokenizer.decode(window, skip_special_tokens=True)
        if len(text) <= len(prefix_text) or text.endswith(_REPLACEMENT):
            return ""  # a partial character (or nothing visible yet): wait for the next tokens
        self._prefix_offset, self._read_offset = self._read_offset, len(self.token_ids)
        return text[len(prefix_text) :]

    def _held_back(self, text: str) -> int:
        """Length of the longest tail of `text` that is a proper prefix of a stop string."""
        longest = 0
        for stop in self.stop:
            for size in range(min(len(stop) - 1, len(text)), longest, -1):
                if text.endswith(stop[:size]):
                    longest = size
                    break
        return longest

    def _send(self, delta: str, unsent: str) -> str:
        self._unsent = unsent
        if delta:
            self._sent.append(delta)
        return delta
