"""grammar: the grammar state stays advanced over the drafts the verifier rejected (seed class: state that must follow
exactly the accepted tokens; vLLM #44006 "Failed to advance FSM").

The masks' walk advances each constrained request's grammar over its drafts; at read-back the rejected ones must be
rolled back before the bonus is consumed. Here none is: the state runs ahead of the committed tokens, the bonus is
consumed after drafts that were never emitted, and the next masks allow tokens that break the output's syntax.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class GrammarAdvancedOverRejected(Mutant):
    fault = Fault("grammar-advanced-over-rejected", "a constrained request's grammar is not rolled back over the "
                  "drafts the verifier rejected", "002 (stale state reused)", "grammar", Proposer)

    def grammar_rollback(self, request_id: str, num_walked: int, num_accepted: int) -> int:
        return 0
