"""The selftest in CI: every injected fault detected, the clean engine passes every check on several seeds."""

from __future__ import annotations

import pytest

from specbench.config import EngineConfig
from specbench.errors import SpecbenchError
from specbench.faults import FAULTS, resolve_fault, wrap_verifier
from specbench.selftest.runner import format_mutation_table, run_selftest


def test_unknown_fault_lists_supported():
    with pytest.raises(SpecbenchError, match="supported: .*draft-kv-slice"):
        EngineConfig(target="x", inject="no-such-fault")


def test_fault_off_costs_nothing():
    def verify(*args):
        return args

    assert wrap_verifier(verify, None) is verify
    assert wrap_verifier(verify, resolve_fault("draft-kv-slice")) is verify


def test_selftest_detects_every_fault_without_false_alarms():
    rows = run_selftest(seeds=(0, 1))
    table = format_mutation_table(rows)
    clean = [r for r in rows if r.inject is None]
    mutants = {r.inject: r for r in rows if r.inject is not None}
    assert len(clean) == 2 and set(mutants) == set(FAULTS), table
    for row in clean:
        assert not row.detected, f"false alarm on the clean engine:\n{table}"
    for name, row in mutants.items():
        assert row.detected, f"{name} went undetected:\n{table}"
    # Target-corrupting faults must change greedy output; draft-only faults must not (they are lossless).
    for name, row in mutants.items():
        greedy = next(r for r in row.results if r.name == "greedy")
        assert greedy.passed == (FAULTS[name].layer == "draft"), f"{name}: {greedy.detail}"
