"""Fault injection stays out of the production engine: the engine and the proposers only call the identity hook
seam (specbench.runtime.hooks); every mutant, its name and its leaked state live in specbench.faults."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import specbench
from specbench.faults import FAULTS, Mutant, build_hooks
from specbench.faults.catalog import MUTANTS
from specbench.runtime.hooks import NO_HOOKS, PhaseHooks

ROOT = Path(specbench.__file__).parent
PRODUCTION = ("speculation", "engine")


def _production_sources() -> dict[str, str]:
    files = [p for d in PRODUCTION for p in sorted((ROOT / d).rglob("*.py"))]
    assert len(files) > 10
    return {str(p.relative_to(ROOT)): p.read_text() for p in files}


def _mutant_fields() -> set[str]:
    return {name for m in MUTANTS for name in vars(m())}


def test_no_fault_name_or_mutant_state_in_engine_or_spec():
    fields = _mutant_fields()
    assert "_written_end" in fields  # the scan below looks for something real
    forbidden = [re.compile(r"\bfaults?\b", re.I), re.compile(r"\bmutant", re.I)]
    forbidden += [re.compile(re.escape(name)) for name in FAULTS]
    forbidden += [re.compile(r"\b" + re.escape(f) + r"\b") for f in fields]
    hits = [f"{path}: {m.group(0)!r}" for path, text in _production_sources().items()
            for pattern in forbidden for m in [pattern.search(text)] if m]
    assert not hits, hits


def test_the_scan_would_see_a_fault_branch():
    leaked = 'if self.fault.name == "draft-kv-slice":\n    self._written_end = 3\n'
    patterns = [re.compile(r"\bfaults?\b", re.I), re.compile(re.escape("draft-kv-slice"))]
    assert all(p.search(leaked) for p in patterns)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.fault.name)
def test_each_mutant_bends_at_least_one_hook_and_is_fresh_per_engine(mutant):
    below_mutant = mutant.__mro__[:mutant.__mro__.index(Mutant)]  # the mutant and its own bases (VerifierMutant)
    overridden = [name for cls in below_mutant for name, value in vars(cls).items()
                  if callable(value) and name != "__init__" and hasattr(PhaseHooks, name)]
    assert overridden, f"{mutant.fault.name} overrides no hook and installs nothing"
    a, b = build_hooks(mutant.fault.name), build_hooks(mutant.fault.name)
    assert type(a) is mutant and a is not b and a.eager_drafting


def test_clean_engine_holds_the_identity_hooks():
    assert build_hooks(None) is NO_HOOKS and not NO_HOOKS.eager_drafting
