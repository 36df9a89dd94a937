"""`specbench stress --target <tiny Qwen3-Next>` on the embedded engine: the engine knows its target is hybrid (the
conditions carry their hybrid reasons, after-restart included: the engine restarts itself), and a mixed-batch state
mutant fails at zero-draft-mix-8 while the cache conditions at concurrency 1 pass (the fault also runs at k = 0,
where no round mixes: the baseline stays clean)."""

from __future__ import annotations

import pytest

from tests.stress.test_stress_faults import _verdicts
from tests.support.cli_run import run_main
from tests.support.tiny_hybrid import build_tiny_hybrid

pytestmark = pytest.mark.slow  # two matrices on the embedded engine (~10-20 s on 2 cores)


@pytest.fixture(scope="module")
def hybrid_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("stress_hybrid_embedded") / "target"
    build_tiny_hybrid(out, seed=0)
    return out


def _stress(target, *args: str):
    return run_main("stress", "--target", str(target), "--method", "ngram", "-k", "3", "--device", "cpu",
                    "--kv-cache-gb", "0.05", "--max-concurrency", "8", "--quiet", "--num-requests", "4",
                    "--max-tokens", "12", *args)


def test_the_embedded_engine_knows_a_hybrid_and_catches_a_mixed_batch_state_fault(hybrid_dir):
    clean = _stress(hybrid_dir, "--conditions", "warm-cache,after-restart,zero-draft-mix-8")
    assert clean.exit_code == 0, clean.stdout + clean.stderr
    assert "embedded engine, hybrid target (recurrent state)" in clean.stdout
    assert _verdicts(clean.stdout) == dict.fromkeys(("warm-cache", "after-restart", "zero-draft-mix-8"), "PASS")
    assert clean.stdout.count("| hybrid: ") == 3
    faulty = _stress(hybrid_dir, "--conditions", "warm-cache,zero-draft-mix-8", "--inject",
                     "state-stale-in-mixed-batch")
    assert faulty.exit_code == 1, faulty.stdout
    assert faulty.stdout.startswith("## specbench stress: FAIL: FAIL at zero-draft-mix-8 ("), faulty.stdout
    assert _verdicts(faulty.stdout) == {"warm-cache": "PASS", "zero-draft-mix-8": "FAIL"}
