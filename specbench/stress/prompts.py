"""A canary's prompt at an exact length: filler text (its own per request, or one shared by every request of a
condition: a long system prompt, a warm prefix cache), then the canary's question at the end, where the answer
starts. With a local tokenizer the prompt is token ids of exactly the asked length (block multiples +- 1 need
exactness); without one (a server with no local tokenizer) it is text of about that length, and says so."""

from __future__ import annotations

import random
from dataclasses import dataclass

from specbench.stress.canary import Canary

# Plain words (no digits: a canary's answer never appears in its filler), in sentences.
_WORDS = ("river stone window garden letter morning silver market winter harbour paper lantern meadow candle "
          "orchard bridge forest kettle ribbon valley thunder pocket mirror ladder saddle violet copper basket "
          "anchor feather marble tunnel castle shadow blanket").split()
CHARS_PER_TOKEN = 4  # the guess for text without a tokenizer (English BPE averages about 4 characters a token)


@dataclass(frozen=True, slots=True)
class BuiltPrompt:
    text: str
    token_ids: tuple[int, ...] | None  # [num_prompt_tokens] exact; None: text only (no local tokenizer)

    @property
    def is_exact(self) -> bool:
        return self.token_ids is not None


def filler_text(seed: int, num_words: int) -> str:
    rng = random.Random(f"filler/{seed}")
    sentences, words = [], 0
    while words < num_words:
        n = rng.randrange(6, 14)
        sentence = " ".join(rng.choice(_WORDS) for _ in range(n))
        sentences.append(sentence[0].upper() + sentence[1:] + ".")
        words += n
    return " ".join(sentences)


def build_prompt(canary: Canary, num_tokens: int, filler_seed: int, tokenizer=None) -> BuiltPrompt:
    """A prompt of `num_tokens` tokens (at least the question's own): filler drawn from `filler_seed` (one seed for
    every request of a condition = one shared prefix), then the question. `tokenizer`: a transformers tokenizer, or
    None for text of about that length."""
    question = "\n\n" + canary.question
    if tokenizer is None:
        num_chars = max(0, num_tokens * CHARS_PER_TOKEN - len(question))
        return BuiltPrompt(filler_text(filler_seed, num_chars // 5 + 1)[:num_chars] + question, None)
    tail = list(tokenizer(question, add_special_tokens=False)["input_ids"])
    num_head = max(0, num_tokens - len(tail))
    # enough words for the head (BPE: at most a few tokens a word), cut to the exact count
    head = list(tokenizer(filler_text(filler_seed, num_head + 8), add_special_tokens=True)["input_ids"])[:num_head]
    ids = tuple(int(t) for t in head + tail)
    return BuiltPrompt(tokenizer.decode(ids, skip_special_tokens=False), ids)
