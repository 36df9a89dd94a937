"""Speed only: every speculative round stalls before its verification (as a stray host sync, a lock or a debug
copy left in a hot path would), so speculation gets slower and nothing else changes: tokens, acceptance,
logprobs and accuracy stay exact, and every check that compares them passes. `specbench gate`'s speed stage (the
run-to-run interval of throughput and TPOT against a reference) is its check; the selftest, which compares tokens
and statistics, refuses it."""

from __future__ import annotations

import time
from collections.abc import Callable

from specbench.faults.fault import Fault
from specbench.faults.verifier_mutant import VerifierMutant
from specbench.speculation.capabilities import Proposer

STALL_S = 0.02  # per round: several times a tiny model's whole round on CPU, a few percent of a real model's


class VerifyStall(VerifierMutant):
    fault = Fault("verify-stall", f"each speculative round waits {STALL_S * 1e3:g} ms before verifying (speed only)",
                  "", "speed", Proposer)

    def wrap_verifier(self, verify_fn: Callable) -> Callable:
        def stalled(*args, **kwargs):
            time.sleep(STALL_S)
            return verify_fn(*args, **kwargs)
        return stalled
