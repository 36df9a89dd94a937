"""Ctrl-C during a test stops the whole pytest run, also while library code that reports interrupts (the sweep's
`Interrupted`: cells kept, resume command) is running. Before, `Interrupted` was an Exception: pytest recorded
the running test as failed and went on with the next one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

# The child suite: the first test blocks inside the sweep's cell loop (its except KeyboardInterrupt path), the
# second must never run.
CHILD_TESTS = '''
import time
from pathlib import Path
from types import SimpleNamespace

from specbench.bench import sweep
from specbench.bench.store import RunStore
from specbench.runs.cell_key import CellKey

STARTED, SECOND = Path({started!r}), Path({second!r})


def test_blocks_in_the_cell_loop(tmp_path, monkeypatch):
    def run_cell(*args, **kwargs):
        STARTED.touch()
        time.sleep(120)

    monkeypatch.setattr(sweep, "run_cell", run_cell)
    key = CellKey(0, 0.0, 1, 0)
    config = SimpleNamespace(quiet=True, duration=None, resume=None, is_embedded=False, grid_num_steps=(0,))
    store = RunStore(tmp_path / "run", [key.cell_id], 4)
    sweep._run_missing_cells(None, None, [SimpleNamespace(num_turns=1)], (key,), config, False, None, store)


def test_after_the_interrupt():
    SECOND.touch()
'''


@pytest.mark.slow  # two pytest processes importing torch: ~20 s on a loaded 2-core box
def test_sigint_stops_pytest_inside_library_code(tmp_path):
    started, second = tmp_path / "started", tmp_path / "second"
    child = tmp_path / "test_child_suite.py"
    child.write_text(textwrap.dedent(CHILD_TESTS.format(started=str(started), second=str(second))))
    root = Path(__file__).resolve().parents[1]
    # A shell without job control starts children with SIGINT ignored: give it a terminal process's disposition.
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", str(child)],
        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(root)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120  # generous: importing torch on a loaded 2-core box
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), proc.communicate(timeout=30)[0] if proc.poll() is not None else "never started"
        os.kill(proc.pid, signal.SIGINT)
        output = proc.communicate(timeout=60)[0]  # the test sleeps 120 s: ending within 60 s means it stopped
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2, output  # pytest's "interrupted" exit status, not 1 ("tests failed")
    # pytest's interrupt banner names the KeyboardInterrupt subclass with the sweep's message
    assert "specbench.errors.Interrupted: no cell completed" in output, output
    assert not second.exists(), output  # the run stopped: the next test never started
