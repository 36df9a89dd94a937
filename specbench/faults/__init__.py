"""Fault injection: named mutants of the engine, each reproducing one seed bug (off by default).

Each mutant is one `PhaseHooks` subclass (specbench.runtime.hooks) owning whatever state its bug leaks. Production
code never imports this package: the caller that builds an engine (check, selftest, the `--inject` option of the
commands) turns a name into an `Injection` (`injection(name)`) and hands it to `specbench.llm.create_engine`, which
gives the engine a fresh mutant and calls its `install` once the engine is built. A clean engine holds the identity
hooks. Mutants of the fast production paths (path_mutant.py) call no hook: `install` wraps methods of the built
engine's own objects.
Adding a mutant: one module here and one entry in `catalog.MUTANTS`.
"""

from specbench.faults.catalog import (
           FAULTS,
           NO_FAULT_NAMES,
           Injection,
           build_hooks,
           check_hosted,
           fault_names,
           injection,
           resolve_fault,
           wrap_verifier,
)
from specbench.faults.fault import Fault, Mutant, mutant_label

__all__ = ["FAULTS", "NO_FAULT_NAMES", "Fault", "Injection", "Mutant", "build_hooks", "check_hosted", "fault_names",
           "injection", "mutant_label", "resolve_fault", "wrap_verifier"]
