"""A request's grammar state (grammar/state.py) on the tiny tokenizer: rollback restores the mask exactly, also
across the reasoning marker; a finished grammar takes only end-of-sequence; bitmasks applied in torch."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("llguidance")

from specbench.grammar.bitmask import apply_token_bitmask, num_words  # noqa: E402
from specbench.grammar.library import GrammarLibrary  # noqa: E402
from specbench.grammar.spec import GrammarSpec  # noqa: E402
from specbench.grammar.state import GrammarState  # noqa: E402
from tests.support.tiny_models import EOS_ID, VOCAB_SIZE, load_tiny_tokenizer  # noqa: E402

SCHEMA = {"type": "object", "properties": {"a": {"enum": ["x", "yy"]}, "b": {"type": "boolean"}},
          "required": ["a", "b"], "additionalProperties": False}
DOCUMENT = '{"a":"yy","b":true}'


@pytest.fixture(scope="module")
def library():
    return GrammarLibrary(load_tiny_tokenizer(), VOCAB_SIZE, frozenset({EOS_ID}))


def _state(library, spec) -> GrammarState:
    marker = library.marker_token_ids(spec.starts_after) if spec.starts_after else ()
    return GrammarState(library.matcher(spec), marker, frozenset({EOS_ID}), library.llg.torch)


def _mask(state) -> torch.Tensor:
    bitmask = torch.zeros(1, num_words(VOCAB_SIZE), dtype=torch.int32)
    state.fill_mask(bitmask, 0)
    return bitmask


def test_rollback_restores_the_mask_at_every_depth(library):
    spec = GrammarSpec.json_schema(SCHEMA)
    tokens = library.tokenizer.encode(DOCUMENT, add_special_tokens=False)
    state = _state(library, spec)
    masks = []
    for token in tokens:
        masks.append(_mask(state))
        assert state.consume(token)
    for depth in range(len(tokens), 0, -1):
        state.rollback(1)
        assert torch.equal(_mask(state), masks[depth - 1])


def test_refused_token_leaves_the_state_unchanged(library):
    state = _state(library, GrammarSpec.json_schema(SCHEMA))
    before = _mask(state)
    refused = library.tokenizer.encode("x", add_special_tokens=False)[0]
    assert not state.consume(refused)
    assert torch.equal(_mask(state), before) and not state.matcher.is_error()


def test_reasoning_marker_opens_the_grammar_and_rollback_reopens_it(library):
    spec = GrammarSpec.json_schema(SCHEMA, starts_after="</think>")
    state = _state(library, spec)
    assert state.gate.is_open and bool((_mask(state) == -1).all())  # reasoning: every token allowed
    thought = library.tokenizer.encode("hmm</think>", add_special_tokens=False)
    for token in thought:
        assert state.consume(token)
    assert state.is_constraining
    state.rollback(1)
    assert state.gate.is_open  # the marker's last token undone: reasoning again
    assert state.consume(thought[-1]) and state.is_constraining


def test_a_finished_grammar_takes_only_end_of_sequence(library):
    state = _state(library, GrammarSpec.regex("ab"))
    for token in library.tokenizer.encode("ab", add_special_tokens=False):
        assert state.consume(token)
    mask = apply_token_bitmask(torch.zeros(1, VOCAB_SIZE), _mask(state))
    assert torch.isfinite(mask).nonzero()[:, 1].tolist() == [EOS_ID]
    assert not state.consume(5) and state.consume(EOS_ID)
    state.rollback(1)
    assert state.consume(EOS_ID)


def test_apply_token_bitmask_keeps_exactly_the_set_bits():
    logits = torch.randn(2, 70)
    bitmask = torch.zeros(2, num_words(70), dtype=torch.int32)
    bitmask[0, 0] = 1 << 3
    bitmask[1, 2] = 1 << 5  # token 69
    masked = apply_token_bitmask(logits, bitmask)
    assert torch.isfinite(masked).nonzero().tolist() == [[0, 3], [1, 69]]
    assert masked[0, 3] == logits[0, 3]
