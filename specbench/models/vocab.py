"""Where vocabularies meet: each mismatch is refused at load, naming both sizes, before anything runs.

An id is only meaningful inside the vocabulary that defines it: a tokenizer that can emit ids past the model's
embedding, or a draft that cannot embed every id the target may emit (or proposes ids the target lacks), would
fail mid-run with an index error (or score the wrong tokens).
"""

from __future__ import annotations

from specbench.errors import SpecbenchError


def check_tokenizer_fits(tokenizer, vocab_size: int, what: str) -> None:
    """Every id the tokenizer can produce must have an embedding row in a model of `vocab_size` ids."""
    if tokenizer is None:
        return
    num_ids = len(tokenizer)  # base vocabulary plus added tokens
    if num_ids > vocab_size:
        raise SpecbenchError(
            f"the {what} tokenizer has {num_ids} ids but the {what} model's vocabulary has {vocab_size}: "
            "the tokenizer belongs to another model"
        )


def check_draft_vocab(draft_vocab_size: int, target_vocab_size: int) -> None:
    """A draft LM embeds every id the target commits and proposes ids the target scores: the sizes must agree."""
    if draft_vocab_size == target_vocab_size:
        return
    why = (
        "it cannot embed the target ids at and above its size"
        if draft_vocab_size < target_vocab_size
        else "it would propose ids the target does not have"
    )
    raise SpecbenchError(
        f"draft vocabulary ({draft_vocab_size} ids) does not match the target's ({target_vocab_size} ids): {why}; "
        "the draft must use the target's tokenizer and vocabulary"
    )
