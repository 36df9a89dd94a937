"""The engine's per-step record (StepStats rows), and when the host last read a step's tokens."""

from __future__ import annotations

from specbench.engine.stats import StepStats
from specbench.engine.timing import PhaseTimer


class StepLog:
    def __init__(self) -> None:
        self.step_stats: list[StepStats] = []  # one row per step, in the order steps were read back
        self._step_index = 0
        self._last_read_time: float = 0.0  # perf_counter when the host last read a step's tokens

    def record(self, timer: PhaseTimer, *, start: float, end: float, phase: str, num_reqs: int, num_tokens: int,
               num_drafted: int, num_accepted: int, num_preempted: int, num_free_blocks: int, read_time: float,
               is_overlapped: bool = False, num_prefix_queried: int = 0, num_prefix_hit: int = 0) -> None:
        """One StepStats row. A step launched before the previous one was read back (overlapped) counts from that
        read-back, when the host could first work on it: the steps of a steady batch then add up to its wall time."""
        first = max(start, self._last_read_time) if is_overlapped else start
        self.step_stats.append(
            StepStats(
                step=self._step_index,
                start_time=start,
                phase=phase,
                num_reqs=num_reqs,
                num_scheduled_tokens=num_tokens,
                num_draft_tokens=num_drafted,
                num_accepted_tokens=num_accepted,
                num_preempted=num_preempted,
                num_free_blocks=num_free_blocks,
                draft_ms=timer.elapsed_ms("draft"),
                target_ms=timer.elapsed_ms("target"),
                sample_ms=timer.elapsed_ms("sample"),
                step_ms=(end - first) * 1e3,
                num_prefix_queried_tokens=num_prefix_queried,
                num_prefix_hit_tokens=num_prefix_hit,
            )
        )
        self._step_index += 1
        self._last_read_time = read_time
