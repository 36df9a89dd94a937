"""The draft LM proposer keeps a preempted request's draft-KV bookkeeping across `free`.

After the restart its catch-up skips positions whose draft KV lived in blocks the preemption freed: only a run
that preempts can see it.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.drafters.draft_model import DraftModelProposer


class DraftStateKeptOnPreemption(Mutant):
    fault = Fault("draft-state-kept-on-preemption", "the draft LM keeps a preempted request's draft-KV bookkeeping",
                  "", "draft", DraftModelProposer)

    def keeps_draft_state(self, request_id: str) -> bool:
        return True
