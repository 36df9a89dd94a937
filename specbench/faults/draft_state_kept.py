"""The draft LM proposer keeps a preempted request's draft-KV bookkeeping across `free`.

After the restart its catch-up skips positions whose draft KV lived in blocks the preemption freed: only a run
that preempts can see it.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant


class DraftStateKeptOnPreemption(Mutant):
    fault = Fault("draft-state-kept-on-preemption", "the draft LM keeps a preempted request's draft-KV bookkeeping",
                  "", "draft", ("draft",))

    def forget_draft_state(self, request_id: str) -> bool:
        return False
