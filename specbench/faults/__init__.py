"""Fault injection: named mutants of the engine, each reproducing one seed bug (off by default).

Each mutant is one `PhaseHooks` subclass (specbench.runtime.hooks) owning whatever state its bug leaks; the
engine builder resolves `--inject` to a fresh instance per engine and hands it to the proposer and the
engine, which call the hooks at fixed points of each phase. A clean engine holds the identity hooks.
Mutants of the fast production paths (path_mutant.py) call no hook: `install_fault` lets one wrap methods of the
built engine's own objects, once, where the engine is built.
Adding a mutant: one module here and one entry in `catalog.MUTANTS`.
"""

from specbench.faults.catalog import (
           FAULTS,
           build_hooks,
           check_hosted,
           fault_names,
           install_fault,
           resolve_fault,
)
from specbench.faults.fault import Fault, Mutant, mutant_label

__all__ = ["FAULTS", "Fault", "Mutant", "build_hooks", "check_hosted", "fault_names", "install_fault", "mutant_label",
           "resolve_fault"]
