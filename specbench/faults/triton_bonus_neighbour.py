"""verify.triton: the Triton verifier reads a fully accepted request's bonus token from the previous request's
last logits row (seed class: off by one, in the per-request row offsets).

Only the Triton verifier (speculation/verify/chain_triton.py) is bent; an engine on the torch verifier is left clean.
Request 0 and requests with a rejection are right, so the bug shows only when a later request accepts all its drafts.
"""

from __future__ import annotations

from specbench.faults.fault import Fault
from specbench.faults.output_rewrite import rewrite_output_token
from specbench.faults.path_mutant import PathMutant, wrap_method
from specbench.speculation.capabilities import Proposer


class TritonBonusNeighbour(PathMutant):
    fault = Fault("triton-bonus-neighbour", "the Triton verifier takes a full round's bonus from the previous "
                  "request's last row", "", "target", Proposer, path="verify.triton")

    def install(self, engine) -> None:
        if engine.parts.verifier == "triton":
            wrap_method(engine.step_runner, "verify_fn",
                        lambda verify_fn: rewrite_output_token(verify_fn, _neighbour_bonus))


def _neighbour_bonus(target_logits, st, r, first_row, num_draft, num_accepted):
    if r == 0 or num_draft == 0 or num_accepted < num_draft:
        return None
    return target_logits[first_row - 1].argmax()  # the previous request's bonus row
