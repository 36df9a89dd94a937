"""torch's intra-op thread count for an engine's CPU work, set on each thread that steps the engine.

OpenMP keeps the thread count per calling thread: `torch.set_num_threads` on the main thread does not reach a
thread that steps the engine later (`specbench serve`'s engine thread), which keeps OpenMP's default team. So the
engine applies its setting on the first step of every new stepping thread.

Why it matters: a CPU step of a small model is many short ops; with more than one thread each op ends in a barrier
and idle OpenMP workers spin-wait between ops. On a loaded machine a descheduled worker stalls the barrier while
the others spin, so the same steps cost several times the CPU time of one thread (docs/benchmarks/
cpu-embedded-vs-serve.md).
"""

from __future__ import annotations

import threading

import torch


class CpuThreads:
    def __init__(self, num_threads: int | None) -> None:
        self.num_threads = num_threads  # None: leave torch's default (one per core) alone
        self._applied_on: int | None = None  # threading.get_ident() of the thread last set

    def on_step(self) -> None:
        """Call at the start of every engine step (cheap: one comparison once set on this thread)."""
        if self.num_threads is None:
            return
        ident = threading.get_ident()
        if ident != self._applied_on:
            torch.set_num_threads(self.num_threads)
            self._applied_on = ident
