"""Run the matrix: every condition with speculation off (k = 0) and on (k), the same prompts on both sides.

A side is a backend and its k: the embedded engine and a server launched with --server-cmd change k themselves
(start_cell), a running server's k is fixed (its baseline is another server, --baseline-url). Warm-cache
conditions send their prompts twice and are judged on the second pass (multi-turn: the second pass is each
conversation's next turn, over this side's own first answer); restart conditions restart the backend
between the passes (a new engine; a relaunched server)."""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from specbench.backends.base import BenchBackend
from specbench.runs.cell_key import CellKey
from specbench.runs.finished_turn import FinishedTurn
from specbench.runs.turns import Turn
from specbench.sampling_params import SamplingParams
from specbench.stress.canary import Canary, make_canary
from specbench.stress.conditions import Condition
from specbench.stress.outcomes import ConditionRun, DraftCounts, RequestOutcome, SideRun
from specbench.stress.prompts import build_prompt
from specbench.workloads.base import Prompt, Sample

# Zero-draft mix: what drafts a lot (text to copy from the prompt: n-gram and model drafters match it) and what
# drafts nothing (fresh digits an n-gram drafter cannot find in the prompt), alternating in one batch.
_DRAFTS_A_LOT, _DRAFTS_NOTHING = "echo-hex", "arithmetic"
KINDS_CYCLE = ("echo-id", "echo-hex", "echo-json", "count", "arithmetic")


class BackendSlot:
    """Where one backend lives, replaceable (a restart); both sides share one where the backend sets k itself."""

    def __init__(self, open_backend: Callable[[], BenchBackend]) -> None:
        self._open = open_backend
        self.backend: BenchBackend | None = None

    def live(self) -> BenchBackend:
        if self.backend is None:
            self.backend = self._open()
        return self.backend

    def restart(self) -> BenchBackend:
        self.close()
        return self.live()

    def close(self) -> None:
        if self.backend is not None:
            backend, self.backend = self.backend, None
            backend.close()


@dataclass(frozen=True)
class Side:
    label: str  # "k=0" | "k=3"
    num_steps: int
    slot: BackendSlot


@dataclass(frozen=True, slots=True)
class StressSettings:
    max_tokens: int  # per request (canary answers are short: 24 covers the longest)
    seed: int


def condition_canaries(condition: Condition, seed: int, turn: int = 0) -> tuple[Canary, ...]:
    """Request i's canary; `turn` 1: the multi-turn condition's second question (its own numbers)."""
    out = []
    name = condition.name if turn == 0 else f"{condition.name}/turn{turn}"
    for i in range(condition.num_requests):
        if condition.zero_draft_mix:
            kind = _DRAFTS_A_LOT if i % 2 == 0 else _DRAFTS_NOTHING
        else:
            kind = KINDS_CYCLE[(i + turn) % len(KINDS_CYCLE)]
        out.append(make_canary(kind, _stable_seed(seed, name, i)))
    return tuple(out)


def _stable_seed(seed: int, name: str, i: int) -> int:
    """The same in every process (str hash() is salted per process)."""
    return zlib.crc32(f"{seed}/{name}/{i}".encode())


def _turns(condition: Condition, canaries: tuple[Canary, ...], backend: BenchBackend,
           settings: StressSettings) -> tuple[list[Turn], int, bool]:
    tokenizer = backend.tokenizer if backend.can_tokenize else None
    turns, lengths, exact = [], [], True
    for i, canary in enumerate(canaries):
        filler_seed = _stable_seed(settings.seed, condition.name, -1 if condition.shared_prefix else i)
        built = build_prompt(canary, condition.prompt_tokens, filler_seed, tokenizer)
        exact = exact and built.is_exact
        lengths.append(len(built.token_ids) if built.token_ids is not None else condition.prompt_tokens)
        sample = Sample(sample_id=f"{condition.name}/{i}", category=canary.kind)
        prompt = Prompt(built.text, token_ids=built.token_ids, add_special_tokens=built.token_ids is None)
        params = SamplingParams(temperature=0.0, max_tokens=settings.max_tokens, seed=_stable_seed(settings.seed,
                                                                                                  "req", i))
        turns.append(Turn(sample, 0, prompt, tuple(built.token_ids or ()), params, None))
    return turns, max(lengths, default=0), exact


def _next_turns(turns: list[Turn], first: SideRun, canaries: tuple[Canary, ...], backend: BenchBackend) -> list[Turn]:
    """The second turn of each conversation: its first prompt, this side's own answer, then a new question (token
    ids where the first turn had them: the cached blocks of prompt and answer are hit exactly)."""
    tokenizer = backend.tokenizer if backend.can_tokenize else None
    out = []
    for turn, outcome, canary in zip(turns, first.outcomes, canaries):
        question = "\n\n" + canary.question
        if turn.token_ids and tokenizer is not None:
            answer = outcome.token_ids or tuple(tokenizer(outcome.text, add_special_tokens=False)["input_ids"])
            ids = (*turn.token_ids, *answer, *tokenizer(question, add_special_tokens=False)["input_ids"])
            prompt = Prompt(tokenizer.decode(ids, skip_special_tokens=False), token_ids=ids, add_special_tokens=False,
                            turn_index=1)
        else:
            ids = ()
            prompt = Prompt(turn.prompt.text + outcome.text + question, turn_index=1)
        sample = Sample(sample_id=turn.sample.sample_id, category=canary.kind)
        out.append(Turn(sample, 1, prompt, ids, turn.params, None))
    return out


def _outcomes(finished: list[FinishedTurn], canaries: tuple[Canary, ...]) -> tuple[RequestOutcome, ...]:
    by_index = {int(f.turn.sample.sample_id.rsplit("/", 1)[1]): f for f in finished}
    out = []
    for i, canary in enumerate(canaries):
        f = by_index.get(i)
        if f is None:
            out.append(RequestOutcome(i, canary, "", (), "no answer came back"))
            continue
        out.append(RequestOutcome(i, canary, f.output.text or "", tuple(f.output.output_token_ids), f.error))
    return tuple(out)


def _drafts(finished: list[FinishedTurn], window) -> DraftCounts:
    if finished and all(f.has_draft_stats for f in finished):
        return DraftCounts(sum(f.output.stats.num_draft_tokens for f in finished),
                           sum(f.output.stats.num_accepted_tokens for f in finished), "engine")
    counters = window.counters if window is not None else None
    if counters is not None and counters.num_draft_tokens is not None:
        return DraftCounts(int(counters.num_draft_tokens), int(counters.num_accepted_tokens or 0), counters.source)
    per_request = [f.server_draft for f in finished if f.server_draft is not None]
    if per_request and all(d.num_draft_tokens is not None for d in per_request):
        return DraftCounts(sum(d.num_draft_tokens for d in per_request),
                           sum(d.num_accepted_tokens or 0 for d in per_request), per_request[0].source)
    return DraftCounts(None, None, "")


def _pass(side: Side, condition: Condition, turns: list[Turn], canaries, *, reset_cache: bool):
    backend = side.slot.live()
    backend.start_cell(CellKey(0, 0.0, condition.concurrency, side.num_steps))
    if reset_cache:
        backend.reset_prefix_cache()
    backend.begin_window()
    finished = backend.run_turns(iter(turns), condition.concurrency, id_prefix=f"stress-{condition.name}-")
    window = backend.end_window()
    hit_rate = window.prefix_cache.hit_rate if window is not None else None
    return SideRun(side.label, side.num_steps, _outcomes(finished, canaries), _drafts(finished, window), hit_rate)


def run_side(side: Side, condition: Condition, settings: StressSettings) -> tuple[SideRun, int, bool]:
    canaries = condition_canaries(condition, settings.seed)
    turns, num_tokens, exact = _turns(condition, canaries, side.slot.live(), settings)
    run = _pass(side, condition, turns, canaries, reset_cache=True)
    if condition.multi_turn:
        second = condition_canaries(condition, settings.seed, turn=1)
        run = _pass(side, condition, _next_turns(turns, run, second, side.slot.live()), second, reset_cache=False)
    elif condition.cache == "warm":
        run = _pass(side, condition, turns, canaries, reset_cache=False)
    elif condition.cache == "restart":
        side.slot.restart()
        run = _pass(side, condition, turns, canaries, reset_cache=False)
    return run, num_tokens, exact


# Prompt tokens a server prefills in about the time of one decode step (an order of magnitude: a prefill step is
# compute bound, a decode step reads the weights once); only to weigh long prompts in the time estimate.
PREFILL_TOKENS_PER_STEP = 512


def _work(condition: Condition, settings: StressSettings) -> float:
    """Sequential steps a condition's side takes (passes x waves of `concurrency` requests x (answer tokens +
    prompt tokens / PREFILL_TOKENS_PER_STEP)): what its time scales with, a batch's step costing about what one
    request's does."""
    passes = 1 if condition.cache == "cold" else 2
    waves = math.ceil(condition.num_requests / max(condition.concurrency, 1))
    return passes * waves * (settings.max_tokens + condition.prompt_tokens / PREFILL_TOKENS_PER_STEP)


def _estimate_line(num_done: int, work_done: float, work_left: float, seconds: float, first: tuple[float, float]
                   ) -> str:
    """The time left, from the rate so far; past the first condition without it (its time holds the server's
    warm-up: compiles, graph captures, first allocations), said which."""
    first_work, first_seconds = first
    if num_done > 1 and work_done > first_work:
        rate, basis = (seconds - first_seconds) / (work_done - first_work), f"the last {num_done - 1} conditions' rate"
    else:
        rate, basis = seconds / work_done, "the first condition's rate, its warm-up included"
    return f"stress: about {rate * work_left / 60:.1f} min more (a guess from {basis})"


def plan_lines(conditions: tuple[Condition, ...], not_run, off: Side, on: Side,
               settings: StressSettings) -> list[str]:
    """The plan, printed before anything runs."""
    num_requests = sum(c.num_requests * (1 if c.cache == "cold" else 2) for c in conditions)
    lines = [f"stress plan: {len(conditions)} conditions x 2 sides ({off.label}, {on.label}): {2 * num_requests} "
             f"requests, prompts up to {max((c.prompt_tokens for c in conditions), default=0)} tokens, "
             f"{settings.max_tokens} tokens per answer"]
    lines += [f"  {c.name}: {c.describe()} - {c.why}" for c in conditions]
    lines += [f"  not run: {n.name}: {n.why}" for n in not_run]
    return lines


def run_matrix(conditions: tuple[Condition, ...], off: Side, on: Side, settings: StressSettings,
               progress: Callable[[str], None] = lambda line: None) -> tuple[ConditionRun, ...]:
    """Every condition on both sides. All of one side runs before the other where the sides share a backend that
    relaunches to change k (fewer restarts); each condition's prompts are the same on both."""
    runs: dict[str, dict[str, tuple]] = {c.name: {} for c in conditions}
    total = 2 * sum(_work(c, settings) for c in conditions)
    done, began, num_done, first = 0.0, time.perf_counter(), 0, (0.0, 0.0)
    for side in (off, on):
        for c in conditions:
            start = time.perf_counter()
            progress(f"stress: {c.name} ({c.describe()}) at {side.label}")
            runs[c.name][side.label] = (*run_side(side, c, settings), time.perf_counter() - start)
            done, num_done = done + _work(c, settings), num_done + 1
            if num_done == 1:
                first = (done, time.perf_counter() - began)
            if num_done & (num_done - 1) == 0 and done < total:  # after conditions 1, 2, 4, 8, ...: a refined guess
                progress(_estimate_line(num_done, done, total - done, time.perf_counter() - began, first))
    out = []
    for c in conditions:
        (off_run, num_tokens, exact, t_off), (on_run, _, _, t_on) = runs[c.name][off.label], runs[c.name][on.label]
        out.append(ConditionRun(c, num_tokens, exact, off_run, on_run, t_off + t_on))
    return tuple(out)
