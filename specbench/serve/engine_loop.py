"""One thread owns the LLMEngine: it admits submitted requests, steps while any is unfinished (continuous batching
across HTTP requests) and reports each request's events to its sink. HTTP code never touches the engine.

One request's failure fails that request alone: a request the engine cannot admit gets Rejected/Failed, and a step
that raises is blamed on one request (serve/triage.py), which gets Failed and is dropped (KV freed) while the others
are recomputed and go on. Only an engine that keeps failing, a canary request included, is declared dead
(/health 503, every later request 500)."""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from specbench.engine.token_logprob import TokenLogprob
from specbench.engine.outputs import RequestOutput
from specbench.errors import SpecbenchError
from specbench.sampling_params import SamplingParams
from specbench.serve.metrics import ServerCounters
from specbench.serve.triage import MAX_FAILED_STEPS_IN_ROW, Triage

log = logging.getLogger(__name__)
IDLE_WAIT_S = 0.5  # an idle loop wakes this often to notice stop()
CANARY_PROMPT = (0,)  # token ids of the request that checks a suspect engine (any id of the vocabulary works)
CANARY_PARAMS = SamplingParams(temperature=0.0, max_tokens=1)


@dataclass(frozen=True, slots=True)
class Admitted:
    request_id: str


@dataclass(frozen=True, slots=True)
class Rejected:
    message: str  # the request cannot run (prompt too long, ...): HTTP 400


@dataclass(frozen=True, slots=True)
class Emitted:
    token_ids: tuple[int, ...]  # [num_tokens] committed by one engine step
    logprobs: tuple[TokenLogprob, ...] | None = None  # [num_tokens] when the request asked (SamplingParams)
    prompt_logprobs: tuple[TokenLogprob | None, ...] | None = None  # [num_prompt_tokens] when asked


@dataclass(frozen=True, slots=True)
class Finished:
    output: RequestOutput


@dataclass(frozen=True, slots=True)
class Failed:
    message: str  # the engine failed on this request, or stopped (a bug): HTTP 500


@dataclass(frozen=True, slots=True)
class Aborted:
    message: str  # dropped before finishing (the server is shutting down): HTTP 503


Event = Admitted | Rejected | Emitted | Finished | Failed | Aborted
Sink = Callable[[Event], None]  # called on the engine thread; must not block


@dataclass(frozen=True, slots=True)
class _Submission:
    prompt_token_ids: tuple[int, ...]
    params: SamplingParams
    sink: Sink


@dataclass(slots=True)
class _CacheReset:
    done: threading.Event  # set by the engine thread once the cache is reset
    num_forgotten: int = 0


class EngineLoop:
    def __init__(self, engine) -> None:
        self.engine = engine
        self.counters = ServerCounters(num_positions=engine.num_steps)
        self._inbox: queue.SimpleQueue[_Submission] = queue.SimpleQueue()
        # request ids whose client went away (None: every request, the server is shutting down)
        self._aborts: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        # prefix-cache resets asked for (POST /reset_prefix_cache): each answered on the engine thread, between steps
        self._resets: queue.SimpleQueue[_CacheReset] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._stopping = False
        self._sinks: dict[str, Sink] = {}
        self._ids = itertools.count()
        self.error: str | None = None  # set when the loop died
        self._triage = Triage(engine.scheduler.max_concurrency)
        self._canary_id: str | None = None  # the canary in flight (an internal request: not in the counters)
        self._thread = threading.Thread(target=self._run, name="specbench-engine", daemon=True)
        engine.on_emission = self._on_emission

    @property
    def is_healthy(self) -> bool:
        return self._thread.is_alive() and self.error is None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()

    def abort(self, request_id: str) -> None:
        """Thread-safe: drop the request (its client went away) before its next step; a no-op once finished."""
        self._aborts.put(request_id)
        self._wake.set()

    def abort_all(self) -> None:
        """Thread-safe: the server is shutting down; every request in flight gets Aborted and is dropped."""
        self._aborts.put(None)
        self._wake.set()

    def reset_prefix_cache(self, timeout_s: float) -> int | None:
        """Thread-safe: forget every cached block no request holds (the engine thread does it between steps); the
        number forgotten, or None when the engine caches no prefixes or did not answer within `timeout_s`."""
        if self.engine.scheduler.prefix is None:
            return None
        reset = _CacheReset(threading.Event())
        self._resets.put(reset)
        self._wake.set()
        return reset.num_forgotten if reset.done.wait(timeout_s) else None

    def submit(self, prompt_token_ids: tuple[int, ...], params: SamplingParams, sink: Sink) -> None:
        """Thread-safe: the sink first gets Admitted or Rejected, then Emitted events and Finished (or Failed)."""
        if self.error is not None:
            sink(Failed(self.error))
            return
        self._inbox.put(_Submission(prompt_token_ids, params, sink))
        self._wake.set()

    def _run(self) -> None:
        try:
            while not self._stopping:
                self._admit()
                self._drop_aborted()
                self._reset_prefix_caches()
                if not self.engine.has_unfinished():
                    self._wake.wait(IDLE_WAIT_S)
                    self._wake.clear()
                    continue
                self._step()
        except Exception as err:  # the engine cannot go on: fail what is in flight, report unhealthy
            log.exception("engine loop stopped")
            self._die(f"engine error: {type(err).__name__}: {err}")

    def _reset_prefix_caches(self) -> None:
        while not self._resets.empty():
            reset = self._resets.get()
            reset.num_forgotten = self.engine.scheduler.block_manager.reset_prefix_cache()
            reset.done.set()

    def _step(self) -> None:
        scheduler = self.engine.scheduler
        before = _ids(scheduler.running)
        scheduler.max_concurrency = self._triage.concurrency_for_next_step(len(before))
        try:
            outputs = self.engine.step()
        except Exception as err:
            self._on_failed_step(err, before)
        else:
            for output in outputs:
                if output.request_id == self._canary_id:
                    self._canary_id = None  # the engine can still step
                else:
                    self.counters.on_finish(output)
                self._sinks.pop(output.request_id)(Finished(output))
            if self._triage.is_isolating:  # only then do admissions and the waiting queue matter
                self._triage.on_success(_ids(scheduler.running) - before, {o.request_id for o in outputs},
                                        _ids(scheduler.waiting))
            else:
                self._triage.on_success(set(), set(), set())
        # also here, not only before a step: an isolation that just ended leaves no limit behind an idle engine
        scheduler.max_concurrency = self._triage.concurrency_for_next_step(len(scheduler.running))
        self.counters.set_load(len(scheduler.running), len(scheduler.waiting))
        if scheduler.prefix is not None:  # the engine's totals (the counters start with the engine at 0)
            self.counters.set_prefix_cache(scheduler.prefix.num_queried_tokens, scheduler.prefix.num_hit_tokens)

    def _on_failed_step(self, err: Exception, before: set[str]) -> None:
        log.exception("engine step failed")
        message = f"the engine failed on this request: {type(err).__name__}: {err}"
        after = _ids(self.engine.scheduler.running)  # a prefill that raised has already admitted its requests
        verdict = self._triage.on_failure(before | after, after - before)
        if self._canary_id in verdict.culprits or self._triage.num_failed_in_row >= 2 * MAX_FAILED_STEPS_IN_ROW:
            raise err  # a request known to be harmless failed too: the engine is broken
        self.engine.recover_from_failed_step()
        for request_id in verdict.culprits:
            sink = self._sinks.pop(request_id, None)
            self.engine.abort_request(request_id)
            self.counters.on_failure()
            if sink is not None:
                sink(Failed(message))
        if verdict.is_engine_suspect and self._canary_id is None:
            self._canary_id = f"srv-canary-{next(self._ids)}"
            self.engine.add_request(list(CANARY_PROMPT), CANARY_PARAMS, request_id=self._canary_id)
            self._sinks[self._canary_id] = lambda event: None

    def _die(self, message: str) -> None:
        self.error = message
        for sink in self._sinks.values():
            sink(Failed(self.error))
        self._sinks.clear()

    def _admit(self) -> None:
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return
            request_id = f"srv-{next(self._ids)}"
            try:
                self.engine.add_request(list(item.prompt_token_ids), item.params, request_id=request_id)
            except SpecbenchError as err:
                item.sink(Rejected(str(err)))
                continue
            except Exception as err:  # nothing was registered: the engine goes on without this request
                log.exception("engine could not admit a request")
                item.sink(Failed(f"the engine could not admit this request: {type(err).__name__}: {err}"))
                continue
            self._sinks[request_id] = item.sink
            item.sink(Admitted(request_id))

    def _drop_aborted(self) -> None:
        while True:
            try:
                request_id = self._aborts.get_nowait()
            except queue.Empty:
                return
            for rid in list(self._sinks) if request_id is None else [request_id]:
                sink = self._sinks.pop(rid, None)
                if sink is None or not self.engine.abort_request(rid):
                    continue  # finished meanwhile
                self.counters.on_abort()
                if request_id is None:
                    sink(Aborted("the server is shutting down"))

    def _on_emission(self, request_id: str, token_ids: tuple[int, ...]) -> None:
        sink = self._sinks.get(request_id)
        if sink is not None:
            sink(Emitted(token_ids, *self.engine.emitted_logprobs(request_id, len(token_ids))))


def _ids(requests) -> set[str]:
    return {request.request_id for request in requests}
