"""grammar: rows after a reasoning end marker ("</think>") inside the drafts are left unmasked (vLLM #44297: 29/50
invalid outputs before the fix).

The grammar state follows the marker correctly; only the masks of the rows past a drafted marker are skipped, so
the verify may accept drafts and sample a bonus the grammar refuses. A marker that is committed (not drafted) is
handled right, so plain decoding is exact.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class GrammarMarkerInDraftsUnmasked(Mutant):
    fault = Fault("grammar-marker-in-drafts-unmasked", "rows after a reasoning end marker inside the drafts are not "
                  "masked by the grammar", "", "grammar", Proposer)

    def grammar_masks_after_drafted_marker(self) -> bool:
        return False
