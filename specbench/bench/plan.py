"""A sweep's plan, printed before the first cell: what runs, how much of it, and a calibrated time estimate.

`measure_calibration` times a few short requests on the loaded backend; `make_plan` turns the config, the prompt
counts and that rate into a `SweepPlan`; `format_plan` / `print_plan` show it; `confirm_plan` asks for --yes
when a long run would start from a terminal.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from specbench.errors import SpecbenchError
from specbench.runs.sweep_config import CONFIRM_ABOVE_S, DEFAULT_MAX_WARMUP, SweepConfig
from specbench.workloads.gsm8k import NUM_SHOTS as GSM8K_NUM_SHOTS

if TYPE_CHECKING:
    from specbench.backends.base import BenchBackend
    from specbench.runs.turns import Turn

# what the estimate cannot know: it is measured once, before the run, and the machine may be busier later
ESTIMATE_CAVEAT = "measured at plan time: other load on the machine can make the run longer"
MAX_CALIBRATION_CONCURRENCY = 8  # a batch this wide is timed too; wider cells are assumed no faster per token


@dataclass(frozen=True)
class Calibration:
    """Measured seconds per generated token at two batch widths (wall time / tokens out, short prompts), and the
    seconds of one request with a prompt as long as the workload's and one output token (its prefill)."""

    seconds_per_token_c1: float  # one request at a time
    concurrency: int  # the wider batch timed (1 when only one was)
    seconds_per_token_wide: float  # per token of the whole batch at `concurrency`
    num_requests: int  # requests timed in all
    prefill_s: float = 0.0  # one workload-length prompt, one token out, alone

    def seconds_per_token(self, concurrency: int) -> float:
        """Log-linear between the two measurements; flat beyond the wider one (no further batching gain assumed)."""
        if concurrency <= 1 or self.concurrency <= 1:
            return self.seconds_per_token_c1
        frac = min(1.0, math.log(concurrency) / math.log(self.concurrency))
        return math.exp((1 - frac) * math.log(self.seconds_per_token_c1) + frac * math.log(self.seconds_per_token_wide))


@dataclass(frozen=True)
class SweepPlan:
    workload: str
    num_prompts: int  # samples per cell
    num_requests_per_cell: int | None  # turns per cell (None: bounded by --duration instead)
    is_default_sample: bool  # num_prompts came from the sweep's default sample size, not --num-prompts
    shots: int | None  # gsm8k few-shot examples (None: not a gsm8k workload)
    max_tokens: int
    method: str
    grid_num_steps: tuple[int, ...]
    draft_shapes: tuple[str, ...]  # DraftShape labels of the speculative k's ("chain" alone without trees)
    concurrency: tuple[int, ...]
    temperature: tuple[float | None, ...]
    repeats: int
    warmup: str  # e.g. "= concurrency" or "4"
    num_cells: int
    num_cells_todo: int  # cells this session runs (resume skips completed ones)
    estimate_s: float | None  # None: no calibration (the basis says why)
    estimate_basis: str
    is_mutant: bool = False
    inject: str | None = None

    @property
    def needs_confirmation(self) -> bool:
        return self.estimate_s is not None and self.estimate_s > CONFIRM_ABOVE_S


def measure_calibration(backend: BenchBackend, make_turns: Callable[[int], Sequence[Turn]],
                        max_concurrency: int, prefill_turn: Turn | None = None) -> Calibration:
    """Time short requests: one untimed (first-call costs), two at concurrency 1, then one batch at the widest
    concurrency up to MAX_CALIBRATION_CONCURRENCY; then `prefill_turn` (a workload-length prompt, 1 token out).
    `make_turns(num)`: fresh short synthetic turns (warmup's)."""
    backend.run_turns(make_turns(1), 1, id_prefix="calibrate/first")
    c1 = _seconds_per_token(backend, make_turns(2), 1, "calibrate/c1")
    prefill_s, num_prefill = 0.0, 0
    if prefill_turn is not None:
        start = time.perf_counter()
        backend.run_turns([prefill_turn], 1, id_prefix="calibrate/prefill")
        prefill_s, num_prefill = time.perf_counter() - start, 1
    wide = min(max_concurrency, MAX_CALIBRATION_CONCURRENCY)
    if wide <= 1:
        return Calibration(c1, 1, c1, 3 + num_prefill, prefill_s)
    per_token_wide = _seconds_per_token(backend, make_turns(wide), wide, "calibrate/wide")
    return Calibration(c1, wide, per_token_wide, 3 + wide + num_prefill, prefill_s)


def _seconds_per_token(backend: BenchBackend, turns: Sequence[Turn], concurrency: int, prefix: str) -> float:
    start = time.perf_counter()
    finished = backend.run_turns(turns, concurrency, id_prefix=prefix)
    wall = time.perf_counter() - start
    # Over HTTP without token ids a request counts as its max tokens (the estimate errs long, not short).
    num_tokens = sum(len(f.output.output_token_ids) or f.turn.params.max_tokens for f in finished)
    return wall / max(1, num_tokens)


def estimate_seconds(config: SweepConfig, num_requests: int, num_tokens_per_cell: int, calibration: Calibration,
                     cells_todo_concurrency: Sequence[int]) -> float:
    """An estimate, not a bound: every request runs to its max tokens and is prefilled alone, k > 0 cells as fast as
    k = 0, warmup included, at the rates measured at plan time. Those long-side assumptions do not make it a bound:
    load that arrives later (other jobs on a shared machine or GPU) slows every cell, and under load runs took up
    to 2.3x the plan (issue 40: 12m23s planned, 28m16s run). `cells_todo_concurrency`: the concurrency of every cell
    left to run."""
    from specbench.bench.warmup import WARMUP_MAX_TOKENS

    return sum((num_tokens_per_cell + config.num_warmup(c) * WARMUP_MAX_TOKENS) * calibration.seconds_per_token(c)
               + num_requests * calibration.prefill_s for c in cells_todo_concurrency)


def make_plan(config: SweepConfig, *, num_prompts: int, num_requests: int, max_tokens: int, num_tokens_per_cell: int,
              num_cells: int,
              cells_todo_concurrency: Sequence[int], calibration: Calibration | None,
              no_calibration_reason: str = "no calibration", is_default_sample: bool = False) -> SweepPlan:
    """`num_tokens_per_cell`: the sum of the requests' max tokens; `cells_todo_concurrency`: the concurrency of
    every cell this session runs; `is_default_sample`: the prompt count is the sweep's default sample
    (DEFAULT_NUM_PROMPTS), not the user's."""
    if config.duration is not None:
        estimate = sum(config.duration for _ in cells_todo_concurrency)
        basis = f"--duration {config.duration:g} s per cell"
        requests: int | None = None
    elif calibration is None:
        estimate, basis, requests = None, no_calibration_reason, num_requests
    else:
        estimate = estimate_seconds(config, num_requests, num_tokens_per_cell, calibration, cells_todo_concurrency)
        basis = (f"an estimate, not a bound: every request to its max tokens at the measured "
                 f"{1 / calibration.seconds_per_token_c1:.1f} tok/s (c=1)"
                 + (f", {1 / calibration.seconds_per_token_wide:.1f} tok/s (c={calibration.concurrency})"
                    if calibration.concurrency > 1 else "")
                 + (f", {calibration.prefill_s:.2f} s per prompt prefill" if calibration.prefill_s else "")
                 + f" from {calibration.num_requests} calibration requests; speculation not counted; "
                 + ESTIMATE_CAVEAT)
        requests = num_requests
    return SweepPlan(
        workload=config.workload, num_prompts=num_prompts, num_requests_per_cell=requests,
        is_default_sample=is_default_sample,
        shots=config.shots if config.shots is not None else
        (GSM8K_NUM_SHOTS if config.workload == "gsm8k" else None),
        max_tokens=max_tokens, method=config.engine.method, grid_num_steps=config.grid_num_steps,
        draft_shapes=tuple(shape.label() for shape in config.grid_draft_shapes),
        concurrency=config.concurrency, temperature=config.temperature, repeats=config.repeats,
        warmup=f"= concurrency, at most {DEFAULT_MAX_WARMUP}," if config.warmup is None else str(config.warmup),
        num_cells=num_cells, num_cells_todo=len(cells_todo_concurrency), estimate_s=estimate,
        estimate_basis=basis, is_mutant=config.inject is not None, inject=config.inject,
    )


def format_duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def _values(values: Sequence[object]) -> str:
    return ",".join("default" if v is None else f"{v:g}" if isinstance(v, float) else str(v) for v in values)


def format_plan(plan: SweepPlan) -> str:
    prompts = f"{plan.num_prompts} prompts"
    if plan.is_default_sample:
        prompts += " (default sample; --num-prompts N, or 0 for all)"
    requests = ("bounded by --duration" if plan.num_requests_per_cell is None
                else f"{plan.num_requests_per_cell} requests")
    estimate = "unknown" if plan.estimate_s is None else f"~{format_duration(plan.estimate_s)}"
    lines = [
        f"plan: {plan.num_cells_todo} of {plan.num_cells} cells"
        + (f"  [MUTANT: --inject {plan.inject}]" if plan.is_mutant else ""),
        f"  workload   {plan.workload}: {prompts}, {requests} per cell"
        + (f", {plan.shots}-shot" if plan.shots is not None else "") + f", max {plan.max_tokens} tokens",
        f"  grid       method {plan.method} x k {_values(plan.grid_num_steps)}"
        + ("" if plan.draft_shapes == ("chain",) else f" x shape {','.join(plan.draft_shapes)}")
        + f" x concurrency {_values(plan.concurrency)} x temperature {_values(plan.temperature)}",
        f"  repeats    {plan.repeats}; warmup {plan.warmup} requests per cell",
        f"  estimate   {estimate} ({plan.estimate_basis})",
    ]
    return "\n".join(lines)


def plan_line(plan: SweepPlan) -> str:
    """The plan in one line (logs, notebooks)."""
    estimate = ("time unknown" if plan.estimate_s is None else
                f"~{format_duration(plan.estimate_s)} (estimate, not a bound)")
    return (f"plan: {plan.num_cells_todo} cells, {plan.num_prompts} prompts, {plan.method} k "
            f"{_values(plan.grid_num_steps)}, {plan.repeats} repeats, {estimate}")


def print_plan(plan: SweepPlan, *, quiet: bool = False, file: TextIO | None = None) -> None:
    """The plan on stderr; nothing when quiet (stderr then holds only errors; the report carries the plan)."""
    if not quiet:
        print(format_plan(plan), file=file or sys.stderr, flush=True)


def confirm_plan(plan: SweepPlan, *, assume_yes: bool, is_interactive: bool) -> None:
    """Refuse a long run started from a terminal without --yes; never asks when not interactive (CI, pipes)."""
    if assume_yes or not is_interactive or not plan.needs_confirmation:
        return
    raise SpecbenchError(
        f"this sweep is estimated at {format_duration(plan.estimate_s or 0)} (over "
        f"{format_duration(CONFIRM_ABOVE_S)}); rerun with --yes to start it, or shrink it (--num-prompts, "
        f"--concurrency, --num-steps)"
    )
