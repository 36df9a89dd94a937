"""Logprobs as servers return them, read into one type: OpenAI completions (`tokens` / `token_logprobs` /
`top_logprobs`), OpenAI chat (`content[]`, which llama-server also uses on /v1/completions), llama-server's native
`completion_probabilities` (logprob or, with post_sampling_probs, prob form) and vLLM's `prompt_logprobs`.

Lists the server sends side by side (`tokens` / `token_logprobs` / `top_logprobs`) must agree in length, and every
entry must be an object: pairing them to the shortest list would compare 2 tokens of 7 and pass (MalformedLogprobs).

Values are kept as sent: a server that reports 0.0 for every token (llama.cpp #27972; a speculating llama-server
sends 0.0 without alternatives for accepted draft tokens) is read as 0.0, and is_degenerate_logprobs says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Exactly 0.0 needs every other token ~17 nats below the chosen one (float32 log_softmax); a response where more
# than this fraction of the tokens report it has no real distribution behind its logprobs.
MAX_ZERO_FRACTION = 0.5
MIN_TOKENS_FOR_VERDICT = 4
MASS_SLACK = 1e-3  # listed candidates may sum past probability 1 by float rounding only


class MalformedLogprobs(ValueError):
    """A logprobs block whose parts disagree: read as it is, it would silently drop tokens."""


@dataclass(frozen=True, slots=True)
class ServerTokenLogprob:
    token: str
    logprob: float | None  # None where the server sent null (echoed first prompt token)
    top: tuple[tuple[str, float], ...]  # [n] (token, logprob) as the server listed them, most likely first
    token_id: int | None = None  # where the server sends ids (llama.cpp, vLLM prompt_logprobs)


def parse_logprobs(choice: dict[str, Any]) -> list[ServerTokenLogprob] | None:
    """A choice's (or stream chunk choice's) `logprobs` in any OpenAI-style shape; None when it carries none.
    Raises MalformedLogprobs when its parallel lists differ in length or an entry is not an object."""
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, dict):
        return None
    content = logprobs.get("content")
    if isinstance(content, list):
        return [_content_entry(e, "logprob", "top_logprobs") for e in objects_of(content, "logprobs.content")]
    tokens, values, tops = logprobs.get("tokens"), logprobs.get("token_logprobs"), logprobs.get("top_logprobs")
    if isinstance(tokens, list):
        values = values if isinstance(values, list) else [None] * len(tokens)
        tops = tops if isinstance(tops, list) else [None] * len(tokens)
        check_parallel(("logprobs.tokens", tokens), ("logprobs.token_logprobs", values),
                       ("logprobs.top_logprobs", tops))
        return [ServerTokenLogprob(str(token), _number(value), _sorted(_dict_top(top)))
                for token, value, top in zip(tokens, values, tops, strict=True)]
    return None


def check_parallel(*lists: tuple[str, Sequence[Any]]) -> None:
    """Raise MalformedLogprobs unless the named lists, sent as one entry per token, have one length."""
    lengths = {len(values) for _, values in lists}
    if len(lengths) > 1:
        raise MalformedLogprobs(", ".join(f"{len(values)} {name}" for name, values in lists))


def objects_of(entries: list[Any], name: str) -> list[dict[str, Any]]:
    """`entries`, each an object, else MalformedLogprobs: a token without one is not dropped in silence (that
    would shift every later one)."""
    bad = next((i for i, e in enumerate(entries) if not isinstance(e, dict)), None)
    if bad is not None:
        raise MalformedLogprobs(f"{name}[{bad}] is {type(entries[bad]).__name__}, not an object")
    return entries


def parse_llamacpp_native(body: dict[str, Any]) -> list[ServerTokenLogprob] | None:
    """llama-server's POST /completion `completion_probabilities` ({id, token, logprob, top_logprobs} entries, or
    {id, token, prob, top_probs} with post_sampling_probs: probabilities are turned into logprobs)."""
    entries = body.get("completion_probabilities")
    if not isinstance(entries, list):
        return None
    out = []
    for e in objects_of(entries, "completion_probabilities"):
        if "prob" in e or "top_probs" in e:
            entry = _content_entry(e, "prob", "top_probs")
            out.append(ServerTokenLogprob(entry.token, _log(entry.logprob), tuple((t, _log(p)) for t, p in entry.top),
                                          entry.token_id))
        else:
            out.append(_content_entry(e, "logprob", "top_logprobs"))
    return out


def parse_prompt_logprobs(choice: dict[str, Any]) -> list[ServerTokenLogprob | None] | None:
    """vLLM's `prompt_logprobs`: per prompt token null or {token id: {logprob, rank, decoded_token}}: the prompt
    token first (vLLM's order: the token's own row, then its top-n), then its alternatives. `top` lists every
    entry, most likely first (the prompt token included, as vLLM's dict does)."""
    entries = choice.get("prompt_logprobs")
    if not isinstance(entries, list):
        return None
    out: list[ServerTokenLogprob | None] = []
    for e in entries:
        if not isinstance(e, dict) or not e or not all(isinstance(v, dict) for v in e.values()):
            out.append(None)
            continue
        top = _sorted(tuple((str(v.get("decoded_token", k)), _number(v.get("logprob"))) for k, v in e.items()
                            if _number(v.get("logprob")) is not None))
        first_id, first = next(iter(e.items()))
        out.append(ServerTokenLogprob(str(first.get("decoded_token", first_id)), _number(first.get("logprob")),
                                      top, int(first_id) if first_id.lstrip("-").isdigit() else None))
    return out


def is_degenerate_logprobs(tokens: Sequence[ServerTokenLogprob], max_zero_fraction: float = MAX_ZERO_FRACTION,
                           min_tokens: int = MIN_TOKENS_FOR_VERDICT) -> bool:
    """True when a response's logprobs cannot come from a probability distribution: more than `max_zero_fraction`
    of its (at least `min_tokens`) tokens report exactly 0.0 (llama.cpp #27972), or one token's listed candidates
    add up to more than probability 1."""
    values = [t.logprob for t in tokens if t.logprob is not None]
    if len(values) >= min_tokens and sum(v == 0.0 for v in values) > max_zero_fraction * len(values):
        return True
    return any(_mass(t) > 1.0 + MASS_SLACK for t in tokens)


def _mass(t: ServerTokenLogprob) -> float:
    """Probability the token's listed candidates hold (the chosen one counted once)."""
    candidates = dict(t.top)
    if t.logprob is not None:
        candidates.setdefault(t.token, t.logprob)
    return sum(math.exp(v) for v in candidates.values() if v is not None and v <= 0.0) + sum(
        math.inf for v in candidates.values() if v is not None and v > 0.0)


def _content_entry(e: dict[str, Any], value_key: str, top_key: str) -> ServerTokenLogprob:
    top = tuple((str(t.get("token", "")), _number(t.get(value_key))) for t in e.get(top_key) or ()
                if isinstance(t, dict) and _number(t.get(value_key)) is not None)
    token_id = e.get("id")
    return ServerTokenLogprob(str(e.get("token", "")), _number(e.get(value_key)), _sorted(top),
                              token_id if isinstance(token_id, int) and not isinstance(token_id, bool) else None)


def _dict_top(top: Any) -> tuple[tuple[str, float], ...]:
    if not isinstance(top, dict):
        return ()
    return tuple((str(k), _number(v)) for k, v in top.items() if _number(v) is not None)


def _sorted(top: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted(top, key=lambda p: -p[1]))  # stable: ties keep the server's order


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _log(p: float | None) -> float | None:
    if p is None:
        return None
    return math.log(p) if p > 0 else -math.inf
