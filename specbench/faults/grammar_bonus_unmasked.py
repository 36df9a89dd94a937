"""grammar: a speculative round's bonus token is sampled from the unmasked row (the row after the last draft).

Drafted rows are masked, so every accepted draft is valid; when all drafts are accepted the bonus comes from the
raw target distribution and may be a token the grammar refuses. Plain decoding (one row) is exact.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class GrammarBonusUnmasked(Mutant):
    fault = Fault("grammar-bonus-unmasked", "a round's bonus token is sampled without the grammar's mask", "",
                  "grammar", Proposer)

    def grammar_bonus_logits(self, masked, raw, num_rows_per_request):
        bent = masked.clone()
        first = 0
        for num_rows in num_rows_per_request:
            if num_rows > 1:  # a round with drafts: its last row samples the bonus
                bent[first + num_rows - 1] = raw[first + num_rows - 1]
            first += num_rows
        return bent
