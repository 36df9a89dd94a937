"""Is a constrained output one its grammar allows? Judged apart from the engine's grammar code (grammar/book.py,
state.py, draft_mask.py: the masking and rollback under test): a fresh llguidance matcher, driven here, takes the
output's tokens one by one, and a finished output's text is judged as a client would (grammar/conformance.py:
json + jsonschema, or Python's re), with no llguidance at all."""

from __future__ import annotations

from collections.abc import Sequence

from specbench.grammar.conformance import judge
from specbench.grammar.spec import GrammarSpec


def _reasoning_end(tokens: Sequence[int], marker: tuple[int, ...]) -> int | None:
    """Index just past the first occurrence of `marker` in `tokens` (0 without a marker), None when absent."""
    if not marker:
        return 0
    width = len(marker)
    return next((i + width for i in range(len(tokens) - width + 1) if tuple(tokens[i:i + width]) == marker), None)


def output_problem(library, tokenizer, spec: GrammarSpec, tokens: Sequence[int], finish_reason: str,
                   eos_token_ids: frozenset[int]) -> str | None:
    """Why an output breaks `spec`, or None. `library`: a GrammarLibrary (compiles the grammar; the matcher is
    driven here, not by GrammarState). Tokens after the reasoning marker (if any) must each be allowed in turn; a
    finished output (stop) ends with EOS where the grammar accepts, and its text conforms."""
    marker = library.marker_token_ids(spec.starts_after) if spec.starts_after else ()
    start = _reasoning_end(tokens, marker)
    if start is None:
        return None if finish_reason == "length" else f"stopped before its reasoning marker: {list(tokens)}"
    body = list(tokens[start:])
    if finish_reason == "stop" and body and body[-1] in eos_token_ids:
        body = body[:-1]
    matcher = library.matcher(spec)
    for i, token in enumerate(body):
        if matcher.try_consume_tokens([token]) != 1:
            return f"token {start + i} ({token}) refused after {tokenizer.decode(body[:i])!r}"
    if finish_reason != "stop":
        return None  # cut by length: a prefix the grammar allows is all it can be
    text = tokenizer.decode(body, skip_special_tokens=True)
    if not matcher.is_accepting():
        return f"stopped where the grammar is incomplete: {text!r}"
    verdict = judge(spec, text)
    return None if verdict.is_conformant else f"{verdict.error}: {text!r}"
