"""The draft LM proposer keeps a preempted request's draft-KV bookkeeping across `free`.

After the restart its catch-up skips positions whose draft KV lived in blocks the preemption freed: only a run
that preempts can see it.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.faults.path_mutant import wrap_method
from specbench.speculation.drafters.draft_model import DraftModelProposer


class DraftStateKeptOnPreemption(Mutant):
    fault = Fault("draft-state-kept-on-preemption", "the draft LM keeps a preempted request's draft-KV bookkeeping",
                  "", "draft", DraftModelProposer)

    def install(self, engine) -> None:
        proposer = engine.proposer

        def make_free(free):
            def keeping_free(request_id: str) -> None:
                kept = proposer._state.get(request_id)  # a mutant reaches into what it corrupts
                free(request_id)
                if kept is not None:
                    proposer._state[request_id] = kept
            return keeping_free

        wrap_method(proposer, "free", make_free)
