"""One request's grammar state: the reasoning gate, then the llguidance matcher, advanced token by token and rolled
back exactly (each consumed token leaves a record of where it went)."""

from __future__ import annotations

import torch

from specbench.grammar.reasoning import ReasoningGate

# A consumed token's record: where it went, so rollback can undo it. AFTER_STOP: an end-of-sequence token after the
# grammar finished (the matcher stops by itself once nothing can follow; it takes no more tokens).
TO_REASONING, CLOSED_REASONING, TO_GRAMMAR, AFTER_STOP = 0, 1, 2, 3


class GrammarState:
    def __init__(self, matcher, marker_token_ids: tuple[int, ...], eos_token_ids: frozenset[int], llg_torch) -> None:
        self.matcher = matcher  # llguidance LLMatcher
        self.eos_token_ids = eos_token_ids
        self.gate = ReasoningGate(marker_token_ids)
        self.records: list[int] = []  # [num_consumed] TO_REASONING / CLOSED_REASONING / TO_GRAMMAR
        # A committed token the grammar refused: the engine broke its invariant (only a mutant does); the request is
        # unconstrained from then on, so its output shows the break instead of the engine stopping.
        self.is_broken = False
        self._llg_torch = llg_torch

    @property
    def is_constraining(self) -> bool:
        """Whether the next token's row is masked by the grammar (past the reasoning section, not broken)."""
        return not self.gate.is_open and not self.is_broken

    def fill_mask(self, bitmask: torch.Tensor, row: int) -> None:
        """Write the allowed next tokens into bitmask[row] ([num_rows, ceil(vocab / 32)] int32, bit set = allowed)."""
        if self.is_constraining:
            self._llg_torch.fill_next_token_bitmask(self.matcher, bitmask, row)
        else:
            bitmask[row].fill_(-1)

    def consume(self, token_id: int) -> bool:
        """Advance over one token; False (nothing advanced) when the grammar refuses it."""
        if self.is_broken:
            return False
        if self.gate.is_open:
            self.records.append(CLOSED_REASONING if self.gate.consume(token_id) else TO_REASONING)
            return True
        if self.matcher.is_stopped():
            if token_id not in self.eos_token_ids:
                return False
            self.records.append(AFTER_STOP)
            return True
        if self.matcher.try_consume_tokens([token_id]) != 1:  # consume_token would put the matcher in error
            return False
        self.records.append(TO_GRAMMAR)
        return True

    def rollback(self, num_tokens: int) -> None:
        """Undo the newest `num_tokens` consumed tokens."""
        num_grammar = 0
        for _ in range(num_tokens):
            record = self.records.pop()
            if record == TO_GRAMMAR:
                num_grammar += 1
            elif record != AFTER_STOP:
                self.gate.unconsume(record == CLOSED_REASONING)
        if num_grammar:
            self.matcher.rollback(num_grammar)

    def is_complete(self) -> bool:
        """The grammar accepts what was consumed (the output may end here)."""
        return not self.gate.is_open and self.matcher.is_accepting()
