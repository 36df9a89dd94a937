"""grammar: a preempted request's grammar state is rebuilt at the grammar's start, not over its committed tokens
(seed class: per-request state dropped across a phase; SGLang #24413, a grammar that cannot be rolled back).

Preemption frees the request's grammar state with its KV; on resumption the state must be replayed over the output
committed so far. Here it starts afresh: the next tokens begin a second document after the partial first one.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class GrammarNotRestored(Mutant):
    fault = Fault("grammar-not-restored", "a preempted constrained request resumes with its grammar at the start, "
                  "not after its committed tokens", "002 (stale state reused)", "grammar", Proposer,
                  is_plain_hosted=True)

    def grammar_replay(self, request_id, token_ids):
        return ()
