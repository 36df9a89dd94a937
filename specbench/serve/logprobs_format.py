"""The engine's TokenLogprob entries in OpenAI's response shapes (and vLLM's prompt_logprobs extension).

A token's text is its own decode (a token holding part of a UTF-8 character decodes to U+FFFD, as in vLLM); without
a tokenizer it is "token_id:<id>" (vLLM's return_tokens_as_token_ids spelling), so ids are never lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specbench.engine.token_logprob import TokenLogprob


class TokenTexts:
    """Token id -> its text, decoded once per id."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self._texts: dict[int, str] = {}

    def __call__(self, token_id: int) -> str:
        text = self._texts.get(token_id)
        if text is None:
            text = (f"token_id:{token_id}" if self.tokenizer is None
                    else self.tokenizer.decode([token_id], skip_special_tokens=False))
            self._texts[token_id] = text
        return text


def completion_logprobs(entries: Sequence[TokenLogprob], text_of: TokenTexts, first_offset: int) -> dict[str, Any]:
    """/v1/completions `choices[].logprobs` for these tokens; `first_offset`: the text offset of the first one (the
    length of the tokens' text before them in this completion)."""
    tokens = [text_of(e.token_id) for e in entries]
    offsets = []
    offset = first_offset
    for token in tokens:
        offsets.append(offset)
        offset += len(token)
    return {"tokens": tokens, "token_logprobs": [e.logprob for e in entries],
            "top_logprobs": [{text_of(t): lp for t, lp in e.top} for e in entries], "text_offset": offsets}


def chat_logprobs(entries: Sequence[TokenLogprob], text_of: TokenTexts) -> dict[str, Any]:
    """/v1/chat/completions `choices[].logprobs` for these tokens."""

    def one(token_id: int, logprob: float) -> dict[str, Any]:
        text = text_of(token_id)
        return {"token": text, "logprob": logprob, "bytes": list(text.encode())}

    return {"content": [{**one(e.token_id, e.logprob), "top_logprobs": [one(t, lp) for t, lp in e.top]}
                        for e in entries]}


def prompt_logprobs_field(entries: Sequence[TokenLogprob | None], text_of: TokenTexts) -> list[dict | None]:
    """vLLM's `prompt_logprobs`: per prompt token None (the first) or {token id: {logprob, rank, decoded_token}}
    holding the prompt token (first, as vLLM orders it) and its top-n alternatives."""
    out: list[dict | None] = []
    for e in entries:
        if e is None:
            out.append(None)
            continue
        field = {str(e.token_id): {"logprob": e.logprob, "rank": e.rank, "decoded_token": text_of(e.token_id)}}
        for i, (t, lp) in enumerate(e.top):
            field.setdefault(str(t), {"logprob": lp, "rank": i + 1, "decoded_token": text_of(t)})
        out.append(field)
    return out
