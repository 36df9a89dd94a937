"""Canary prompts: questions whose exact answer is known without a reference model (echo an identifier, a hex string
or a JSON object; count words; exact arithmetic). A correct engine answers them the same with speculation on and
off; a speculative bug that corrupts tokens shows as a canary that fails only with speculation on.

Each canary is drawn from its own seed, so a prompt is the same in every run, condition and side."""

from __future__ import annotations

import json
import random
import re
import string
from dataclasses import dataclass

KINDS = ("echo-id", "echo-hex", "echo-json", "count", "arithmetic")


@dataclass(frozen=True, slots=True)
class Canary:
    kind: str  # one of KINDS
    question: str  # the instruction and its data, ending where the answer starts
    answer: str  # the exact answer

    def is_answered(self, completion: str) -> bool:
        """The answer, exactly, as the completion's first non-blank line (or its start, for JSON)."""
        text = completion.strip()
        if self.kind == "echo-json":
            return _first_json(text) == json.loads(self.answer)
        first = text.splitlines()[0].strip() if text else ""
        return first == self.answer or first.rstrip(".") == self.answer


def _first_json(text: str):
    match = re.search(r"\{.*?\}", text, flags=re.DOTALL)
    if match is None:
        return None
    try:
        return json.loads(match.group(0))
    except ValueError:
        return None


def make_canary(kind: str, seed: int) -> Canary:
    rng = random.Random(f"canary/{kind}/{seed}")
    if kind == "echo-id":
        answer = "-".join("".join(rng.choices(string.ascii_uppercase + string.digits, k=4)) for _ in range(3))
        return Canary(kind, f"Repeat this identifier exactly, and nothing else.\nIdentifier: {answer}\nRepeated:",
                      answer)
    if kind == "echo-hex":
        answer = "".join(rng.choices("0123456789abcdef", k=24))
        return Canary(kind, f"Copy this hex string exactly, and nothing else.\nHex: {answer}\nCopy:", answer)
    if kind == "echo-json":
        obj = {"id": rng.randrange(1000, 99999), "tag": "".join(rng.choices(string.ascii_lowercase, k=5)),
               "ok": rng.random() < 0.5}
        answer = json.dumps(obj)
        return Canary(kind, f"Return this JSON object unchanged, and nothing else.\nJSON: {answer}\nReturned:", answer)
    if kind == "count":
        words = ["apple", "pear", "plum", "fig"]
        seq = rng.choices(words, k=rng.randrange(8, 16))
        answer = str(seq.count("apple"))
        return Canary(kind, "How many times does the word apple appear in the list below? Answer with the number "
                      f"only.\nList: {' '.join(seq)}\nNumber:", answer)
    if kind == "arithmetic":
        a, b, c = rng.randrange(100, 999), rng.randrange(100, 999), rng.randrange(2, 9)
        answer = str(a + b * c)
        return Canary(kind, f"Compute exactly, and answer with the number only.\n{a} + {b} * {c} =", answer)
    raise ValueError(f"unknown canary kind {kind!r}; known: {', '.join(KINDS)}")


def canaries(num: int, seed: int) -> tuple[Canary, ...]:
    """`num` canaries cycling through the kinds, canary i drawn from (seed, i)."""
    return tuple(make_canary(KINDS[i % len(KINDS)], seed * 100_003 + i) for i in range(num))
