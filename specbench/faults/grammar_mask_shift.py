"""grammar: draft position i's token bitmask is applied at row i + 1 (vLLM #54442: grammar rows of a verify left
unmasked or misaligned).

Row 0 (after the newest committed token) keeps its own mask, so plain decoding is exact; each later row of a
speculative verify reads the mask of the row before it: a draft the grammar refuses may be accepted, and a bonus
token is sampled under the state one token behind.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class GrammarMaskShifted(Mutant):
    fault = Fault("grammar-mask-shifted", "a verify's draft position i is masked with the grammar row of position "
                  "i - 1", "", "grammar", Proposer)

    def grammar_mask_rows(self, num_rows_per_request, bitmask):
        shifted = bitmask.clone()
        first = 0
        for num_rows in num_rows_per_request:
            shifted[first + 1 : first + num_rows] = bitmask[first : first + num_rows - 1]
            first += num_rows
        return shifted
