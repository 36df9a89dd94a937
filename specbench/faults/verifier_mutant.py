"""The base of the mutants of the verifier (the outputs a speculative round produces): each wraps the verify
function. `install` wraps the built engine's own (`engine.step_runner.verify_fn`), once; the rows check wraps the
function it tests without an engine (catalog.wrap_verifier). No hook in the engine: its verify function is an
attribute."""

from __future__ import annotations

from collections.abc import Callable

from specbench.faults.fault import Mutant
from specbench.faults.path_mutant import wrap_method


class VerifierMutant(Mutant):
    def wrap_verifier(self, verify_fn: Callable) -> Callable:
        raise NotImplementedError(f"{type(self).__name__} must wrap the verify function")

    def install(self, engine) -> None:
        wrap_method(engine.step_runner, "verify_fn", self.wrap_verifier)
