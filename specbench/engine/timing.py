"""Phase timers: CUDA events on the GPU (read after the step's one sync), perf_counter on CPU."""

from __future__ import annotations

import time

import torch


class PhaseTimer:
    def __init__(self, device: torch.device) -> None:
        self.is_cuda = device.type == "cuda"
        self._marks: dict[str, list] = {}

    def start(self, name: str) -> None:
        self._marks[name] = [self._mark(), None]

    def stop(self, name: str) -> None:
        self._marks[name][1] = self._mark()

    def adopt(self, name: str, other: "PhaseTimer") -> None:
        """Report `other`'s phase `name` as this timer's (a phase enqueued during an earlier step)."""
        if name in other._marks:
            self._marks[name] = other._marks[name]

    def _mark(self):
        if self.is_cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def elapsed_ms(self, name: str) -> float:
        """The phase's time; waits for its end event where the step read nothing back (a step of prompt chunks none
        of which is a request's last has no sync: on an H100 `elapsed_time` raised there), a no-op after the step's
        one sync."""
        if name not in self._marks or self._marks[name][1] is None:
            return 0.0
        begin, end = self._marks[name]
        if self.is_cuda:
            end.synchronize()
            return begin.elapsed_time(end)
        return (end - begin) * 1e3
