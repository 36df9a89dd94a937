"""Is a greedy mismatch a near-tied argmax or a real divergence? At the first divergent token, the reference
server's top-2 log-probability margin: below NEAR_TIE_MARGIN nats the two candidates are numerically tied (batched
verify vs single-token decode in bf16/fp16 may flip them), otherwise the speculative output really diverged.

The reference regenerates greedily from the prompt plus the common prefix cut back to the last whitespace (a token
boundary for the usual BPE vocabularies), returning `logprobs` with top-5 alternatives per token; the token whose
text crosses the first differing character is the divergent one. Both logprobs shapes are read: OpenAI completions
(`logprobs.tokens` + `logprobs.top_logprobs[i]` {token: logprob}) and the chat shape llama.cpp also uses for
completions (`logprobs.content[i].top_logprobs` [{token, logprob}]).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from specbench.backends.deadline import DeadlineClient, ServerAnswerError
from specbench.backends.server_logprobs import MalformedLogprobs, check_parallel, objects_of
from specbench.runs.deadlines import REQUEST_TIMEOUT_S
from specbench.workloads.base import Prompt

NEAR_TIE_MARGIN = 0.1  # nats between the top-2 log-probabilities at the divergent token
NEAR_TIE = "near-tie"
DIVERGENT = "divergent"
UNCLASSIFIED = "unclassified"  # no margin available (no logprobs, chat prompt, failed probe): counted as divergent
PROBE_TOKENS = 16
TOP_LOGPROBS = 5


@dataclass(frozen=True, slots=True)
class TokenTop:
    token: str  # the token the reference chose
    top: tuple[tuple[str, float], ...]  # [<= TOP_LOGPROBS] (token, logprob), best first


@dataclass(frozen=True, slots=True)
class TieDiagnosis:
    verdict: str  # NEAR_TIE | DIVERGENT | UNCLASSIFIED
    margin: float | None  # top-1 minus top-2 logprob at the divergent token (nats)
    candidates: tuple[str, ...]  # the top-2 tokens there
    note: str | None  # why unclassified


def classify(margin: float | None, threshold: float = NEAR_TIE_MARGIN) -> str:
    if margin is None or math.isnan(margin):
        return UNCLASSIFIED
    return NEAR_TIE if margin < threshold else DIVERGENT


def parse_logprobs(choice: dict[str, Any]) -> list[TokenTop] | None:
    """Raises MalformedLogprobs (server_logprobs.py) where the lists disagree in length or an entry is no object."""
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, dict):
        return None
    content = logprobs.get("content")
    if isinstance(content, list):
        out = []
        for entry in objects_of(content, "logprobs.content"):
            top = tuple((str(t.get("token", "")), float(t["logprob"])) for t in entry.get("top_logprobs") or ()
                        if isinstance(t, dict) and isinstance(t.get("logprob"), (int, float)))
            out.append(TokenTop(str(entry.get("token", "")), tuple(sorted(top, key=lambda p: -p[1]))))
        return out
    tokens, tops = logprobs.get("tokens"), logprobs.get("top_logprobs")
    if isinstance(tokens, list) and isinstance(tops, list):
        check_parallel(("logprobs.tokens", tokens), ("logprobs.top_logprobs", tops))  # else positions shift
        return [TokenTop(str(token), tuple(sorted(((str(k), float(v)) for k, v in (top or {}).items()),
                                                  key=lambda p: -p[1])))
                for token, top in zip(tokens, tops, strict=True)]
    return None


def diagnose(client: DeadlineClient, model: str, prompt: str, ref_text: str, spec_text: str,
             threshold: float = NEAR_TIE_MARGIN, deadline_s: float = REQUEST_TIMEOUT_S) -> TieDiagnosis:
    """Ask the reference server (`client`) for the top-2 margin where `spec_text` first departs from `ref_text`."""
    diverge = next((i for i, (a, b) in enumerate(zip(ref_text, spec_text)) if a != b), min(len(ref_text),
                                                                                          len(spec_text)))
    cut = max((i for i in range(diverge) if ref_text[i].isspace()), default=0)
    body = {"model": model, "prompt": prompt + ref_text[:cut], "max_tokens": PROBE_TOKENS, "temperature": 0.0,
            "logprobs": TOP_LOGPROBS, "stream": False}
    try:
        response = client.post("/v1/completions", deadline_s, json_body=body)
        response.raise_for_status()
        answer = response.json()
    except ServerAnswerError as err:
        return TieDiagnosis(UNCLASSIFIED, None, (), f"logprobs probe failed ({err})")
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not (isinstance(choices, list) and choices and isinstance(choices[0], dict)):
        return TieDiagnosis(UNCLASSIFIED, None, (), "logprobs probe failed (unexpected answer: no choices[0] object)")
    choice = choices[0]
    try:
        tokens = parse_logprobs(choice)
    except MalformedLogprobs as err:
        return TieDiagnosis(UNCLASSIFIED, None, (), f"the reference server's logprobs are malformed ({err})")
    if not tokens:
        return TieDiagnosis(UNCLASSIFIED, None, (), "the reference server returned no logprobs")
    position = cut
    for token in tokens:
        position += len(token.token)
        if position > diverge:
            if len(token.top) < 2:
                return TieDiagnosis(UNCLASSIFIED, None, (), "fewer than 2 top logprobs at the divergent token")
            margin = token.top[0][1] - token.top[1][1]
            return TieDiagnosis(classify(margin, threshold), margin, (token.top[0][0], token.top[1][0]), None)
    return TieDiagnosis(UNCLASSIFIED, None, (), "the probe did not reach the divergent position")


def diagnose_turn(client: DeadlineClient, model: str, prompt: Prompt | None, ref_text: str, spec_text: str,
                  threshold: float, deadline_s: float, unprobed: str) -> TieDiagnosis:
    """diagnose() for a turn's prompt. A chat prompt (the server renders its template) has no text continuation to
    extend, and a turn whose prompt is not known cannot be asked again: unclassified, `unprobed` saying why."""
    if prompt is None or (prompt.messages and not prompt.add_special_tokens):
        return TieDiagnosis(UNCLASSIFIED, None, (), unprobed)
    return diagnose(client, model, prompt.text, ref_text, spec_text, threshold, deadline_s)
