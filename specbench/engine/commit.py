"""Commit a step's tokens to its requests: stop conditions, emission callbacks, finishing. It owns the table of
unfinished requests by id (the engine adds and aborts through it)."""

from __future__ import annotations

from collections.abc import Callable

from specbench.engine.logprobs import StepLogprobs
from specbench.engine.outputs import RequestOutput
from specbench.engine.request import Request, RequestStatus
from specbench.engine.scheduler import Scheduler
from specbench.engine.stop import StopChecker
from specbench.engine.token_logprob import TokenLogprob
from specbench.runtime.hooks import NO_HOOKS, PhaseHooks


class Committer:
    def __init__(self, scheduler: Scheduler, free_draft_state: Callable[[str], None],
                 stop_checker: StopChecker, hooks: PhaseHooks = NO_HOOKS) -> None:
        self.scheduler = scheduler
        self.hooks = hooks  # the test harness's seam: what a request reports of its tokens' logprobs
        self.free_draft_state = free_draft_state  # StepRunner.free: a finished request's draft state goes too
        self.stop_checker = stop_checker
        self.requests: dict[str, Request] = {}  # every unfinished request, by id
        # Called on the stepping thread with (request_id, tokens it committed this step) as each step commits:
        # streaming servers forward tokens as they are emitted. None: only finished requests are reported.
        self.on_emission: Callable[[str, tuple[int, ...]], None] | None = None

    def commit_all(self, requests, committed, emit_time: float,
                   logprobs: StepLogprobs | None = None) -> list[RequestOutput]:
        """Commit each request's tokens of one step (a request aborted since its launch is skipped); the finished.
        `logprobs`: the step's target logprobs, when a request in it asked."""
        finished = []
        for r, (request, tokens) in enumerate(zip(requests, committed)):
            if request.status is not RequestStatus.RUNNING:
                continue
            token_logprobs = None if logprobs is None else logprobs.for_request(r, tokens)
            token_logprobs = self.hooks.committed_logprobs(token_logprobs)
            reason = self._commit(request, tokens, emit_time, token_logprobs)
            if reason is not None:
                finished.append(self._finish(request, reason))
        return finished

    def _commit(self, request: Request, tokens: list[int], emit_time: float,
                token_logprobs: list[TokenLogprob] | None = None) -> str | None:
        reason = None
        num_emitted = 0
        for i, token in enumerate(tokens):
            request.output_token_ids.append(token)
            if token_logprobs is not None:
                request.output_logprobs.append(token_logprobs[i])
            num_emitted += 1
            reason = self.stop_checker.check(request)
            if reason is not None:
                break
        request.stats.emission_times.append(emit_time)
        request.stats.tokens_per_emission.append(num_emitted)
        if self.on_emission is not None:
            self.on_emission(request.request_id, tuple(request.output_token_ids[-num_emitted:]))
        return reason

    def _finish(self, request: Request, reason: str) -> RequestOutput:
        self.scheduler.finish(request, reason)
        self.free_draft_state(request.request_id)
        del self.requests[request.request_id]
        return RequestOutput(
            request_id=request.request_id,
            prompt=request.prompt_text,
            prompt_token_ids=tuple(request.prompt_token_ids),
            output_token_ids=tuple(request.output_token_ids),
            text=self.stop_checker.final_text(request),
            finish_reason=reason,
            stats=request.stats,
            logprobs=None if request.sampling_params.logprobs is None else tuple(request.output_logprobs),
            prompt_logprobs=request.prompt_logprobs,
        )
