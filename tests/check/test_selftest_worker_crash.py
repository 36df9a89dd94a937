"""`selftest --jobs N` when a worker dies (selftest/parallel.py): on CUDA a mutant's out-of-range index is a
device-side assert that aborts its process and breaks the whole pool. The row that killed its process alone is a
detected (crashed) row, the rows its pool was running with it run again and pass, a worker whose CUDA context a
caught crash left unusable runs nothing more, and a clean row that dies is still the run's error."""

from __future__ import annotations

import pytest

from specbench.check.budget import BUDGETS
from specbench.errors import SpecbenchError
from specbench.faults.catalog import resolve_fault
from specbench.selftest.parallel import WORKER_DIED, run_parallel
from specbench.selftest.row_tasks import SeedTask
from tests.support.selftest_fake_rows import KILLS_ITS_PROCESS, POISONS_ITS_WORKER, fake_row

FAULTS = (KILLS_ITS_PROCESS, POISONS_ITS_WORKER)


def _seed_task(root, seed: int) -> SeedTask:
    return SeedTask(str(root), seed, ("draft",), 3, "cpu", None, ("greedy", "rows"), BUDGETS["fast"], trees=False,
                    chunked=False, constrained=False)


@pytest.mark.slow  # spawned workers (each imports torch and the engine) and a tiny pair's preparation: ~40 s
def test_a_mutant_that_kills_its_process_is_a_detected_row_and_nothing_else_changes(tmp_path):
    chosen = [resolve_fault(name) for name in FAULTS]
    rows = run_parallel([_seed_task(tmp_path, 0)], chosen, jobs=2, row_runner=fake_row)
    by_inject = {row.inject: row for row in rows}
    assert set(by_inject) == {None, *FAULTS}
    killed = by_inject[KILLS_ITS_PROCESS]
    assert killed.detected and killed.results[0].is_crashed and killed.results[0].detail == WORKER_DIED
    assert killed.results[1].skipped
    # no false alarm: every clean row passed, run where it could (the poisoned worker ran nothing after its row)
    assert all(not row.detected for row in rows if row.inject is None)
    assert all(row.detected and row.results[0].detail == "fake" for row in rows
               if row.inject == POISONS_ITS_WORKER)


@pytest.mark.slow
def test_a_clean_row_that_kills_its_process_is_still_the_runs_error(tmp_path):
    from tests.support import selftest_fake_rows

    # the worker's runner dies on every row, clean ones included
    with pytest.raises(SpecbenchError, match=r"worker process died .* while (none|draft) seed 0 clean was running alone"):
        run_parallel([_seed_task(tmp_path, 0)], [], jobs=1, row_runner=selftest_fake_rows.dies_always)
