"""The step loop: schedule, propose, verify (or prefill), commit, emit."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import torch

from specbench.config import EngineConfig
from specbench.engine.builder import EngineParts, build_engine_parts
from specbench.engine.inputs import build_prefill_input, build_verify_input
from specbench.engine.outputs import RequestOutput
from specbench.engine.overlap import InflightDecode, OverlappedDecode, copy_to_host
from specbench.engine.round_overlap import InflightRound, OverlappedRounds, VerifyLaunch
from specbench.engine.request import Request
from specbench.engine.scheduler import ScheduledBatch
from specbench.engine.stats import RequestStats, StepStats
from specbench.engine.timing import PhaseTimer
from specbench.errors import SpecbenchError
from specbench.runtime.hooks import NO_HOOKS, PhaseHooks
from specbench.sampling_params import SamplingParams
from specbench.spec.proposer import ProposeInput
from specbench.spec.sampling import SamplingTensors, build_sampling_tensors, make_generator, sample
from specbench.spec.synthetic import conditional_rates, synthetic_verify


class LLMEngine(OverlappedDecode, OverlappedRounds):
    def __init__(self, config: EngineConfig, parts: EngineParts | None = None,
                 hooks: PhaseHooks = NO_HOOKS) -> None:
        """`hooks`: what the engine and proposer call while building phase inputs (specbench.llm.create_engine)."""
        self.config = config
        p = parts or build_engine_parts(config, hooks)
        self.parts = p
        self.device, self.dtype = p.device, p.dtype
        self.tokenizer = p.tokenizer
        self.scheduler = p.scheduler
        self.runner = p.runner
        self.proposer = p.proposer
        self.stop_checker = p.stop_checker
        self.vocab_size = p.target.config.vocab_size
        self.block_size = config.block_size
        self.pool_tokens = p.num_kv_blocks * config.block_size
        self.verify_fn = p.verify_fn
        self.hooks = p.hooks
        self.synthetic_conditional = None
        if config.synthetic_acceptance is not None:
            rates = conditional_rates(config.synthetic_acceptance)
            self.synthetic_conditional = torch.tensor(rates, dtype=torch.float32, device=self.device)
            self.synthetic_generator = torch.Generator(device=self.device).manual_seed(config.seed)
        self.step_stats: list[StepStats] = []
        # Called on the stepping thread with (request_id, tokens it committed this step) as each step commits:
        # streaming servers forward tokens as they are emitted. None: only finished requests are reported.
        self.on_emission: Callable[[str, tuple[int, ...]], None] | None = None
        self._requests: dict[str, Request] = {}
        self._ids = itertools.count()
        self._step_index = 0
        self._sampling_cache: tuple[tuple, tuple[int, ...], SamplingTensors] | None = None  # (requests, ids, tensors)
        self.async_scheduling = config.async_scheduling  # config's value until set_async_scheduling
        self._inflight: InflightDecode | None = None  # a plain decode step launched, its tokens not yet read
        self._inflight_round: InflightRound | None = None  # a verify launched, the next round drafted ahead
        self._last_read_time: float = 0.0  # perf_counter when the host last read a step's tokens

    # ---- requests -------------------------------------------------------------------------
    def encode(self, prompt: str) -> list[int]:
        if self.tokenizer is None:
            raise SpecbenchError("this model has no tokenizer: pass token ids, or --tokenizer PATH")
        return self.tokenizer(prompt, add_special_tokens=True)["input_ids"]

    def add_request(
        self,
        prompt: str | list[int],
        params: SamplingParams,
        *,
        request_id: str | None = None,
        arrival_time: float | None = None,
    ) -> str:
        token_ids = self.encode(prompt) if isinstance(prompt, str) else list(prompt)
        if not token_ids:
            raise SpecbenchError("empty prompt")
        if max(token_ids) >= self.vocab_size or min(token_ids) < 0:
            raise SpecbenchError(f"prompt token ids must be in [0, {self.vocab_size})")
        if params.stop and self.tokenizer is None:
            raise SpecbenchError("stop strings need a tokenizer")
        max_len = self.stop_checker.max_model_len
        if len(token_ids) >= max_len:
            raise SpecbenchError(f"prompt of {len(token_ids)} tokens does not fit max_model_len {max_len}")
        needed = min(len(token_ids) + params.max_tokens, max_len) + self.num_steps + 1
        if needed > self.pool_tokens:
            raise SpecbenchError(
                f"KV pool holds {self.pool_tokens} tokens but one request needs up to {needed}; "
                "raise --kv-cache-gb (or lower max tokens)"
            )
        index = next(self._ids)
        request_id = request_id or f"req-{index}"
        if request_id in self._requests:
            raise SpecbenchError(f"duplicate request id {request_id!r}")
        seed = params.seed if params.seed is not None else hash((self.config.seed, index)) & 0x7FFFFFFF
        request = Request(
            request_id=request_id,
            prompt_token_ids=token_ids,
            sampling_params=params,
            stats=RequestStats(
                arrival_time=time.perf_counter() if arrival_time is None else arrival_time,
                num_prompt_tokens=len(token_ids),
                num_drafted_per_pos=[0] * self.num_steps,
                num_accepted_per_pos=[0] * self.num_steps,
            ),
            prompt_text=prompt if isinstance(prompt, str) else None,
            generator=None if params.is_greedy else make_generator(seed, self.device),
        )
        self._requests[request_id] = request
        self.scheduler.add(request)
        return request_id

    def abort_request(self, request_id: str) -> bool:
        """Drop an unfinished request between steps: its KV and draft state are freed and it is never reported.
        False when it is not unfinished (already finished or unknown)."""
        request = self._requests.pop(request_id, None)
        if request is None:
            return False
        self.scheduler.abort(request)
        if self.proposer is not None:
            self.proposer.free(request_id)
        self._sampling_cache = None  # it may hold the aborted request's row
        return True

    @property
    def num_steps(self) -> int:
        """k of the next rounds: the scheduler owns it (it reserves KV for k drafts); config.max_num_steps is the
        largest k the engine was built (graphs captured) for."""
        return self.scheduler.num_steps

    @property
    def needs_features(self) -> bool:
        return bool(self.runner.feature_layers) and self.num_steps > 0

    def set_num_steps(self, num_steps: int) -> None:
        """Change k between runs without reloading models (0 = plain decoding, proposer idle)."""
        if self.has_unfinished():
            raise RuntimeError("set_num_steps needs an idle engine")
        if num_steps < 0:
            raise SpecbenchError(f"num_steps must be >= 0, got {num_steps}")
        if num_steps and self.proposer is None:
            raise SpecbenchError("num_steps > 0 needs a speculative method (ngram, draft, ...)")
        self.scheduler.num_steps = num_steps
        graphs = self.runner.graphs
        if graphs is not None and 0 < num_steps < graphs.max_query_len:
            graphs.capture(num_steps + 1)  # outside any timed region: sweeps call this between cells
        if graphs is not None and self.proposer is not None:
            self.proposer.prepare_cuda_graphs(num_steps)

    def set_async_scheduling(self, is_on: bool) -> None:
        """Switch overlapped plain decoding between runs (benchmarks compare both on one engine)."""
        if self.has_unfinished():
            raise RuntimeError("set_async_scheduling needs an idle engine")
        self.async_scheduling = is_on

    def has_unfinished(self) -> bool:
        """Requests waiting or running, or a launched step still to read back."""
        return self._inflight is not None or self._inflight_round is not None or self.scheduler.has_unfinished()

    # ---- the step loop --------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        """Run one engine step; returns requests that finished in it (possibly none).

        With async scheduling a plain decode step is launched and read back on the next call, after that call
        has launched its successor (engine/overlap.py): the results of a step may come one call late."""
        if self._inflight is not None:
            return self._step_overlapped()
        if self._inflight_round is not None:
            return self._step_round_overlapped()
        start = time.perf_counter()
        batch = self.scheduler.schedule(start)
        if batch is None:
            return []
        self._on_scheduled(batch, start)
        if self._is_overlappable(batch):
            self._inflight = self._launch_plain_decode(batch, start, None)
            return []
        timer = PhaseTimer(self.device)
        st = self._sampling_tensors(batch.requests)
        if batch.is_prefill:
            committed, num_drafted, num_accepted, num_tokens = self._prefill(batch.requests, st, timer)
        else:
            decoded = self._decode(batch, st, timer, start)
            if decoded is None:
                return []
            committed, num_drafted, num_accepted, num_tokens = decoded
        emit_time = time.perf_counter()
        finished = []
        for request, tokens in zip(batch.requests, committed):
            reason = self._commit(request, tokens, emit_time)
            if reason is not None:
                finished.append(self._finish(request, reason))
        self.step_stats.append(
            StepStats(
                step=self._step_index,
                start_time=start,
                phase="prefill" if batch.is_prefill else "decode",
                num_reqs=len(batch.requests),
                num_scheduled_tokens=num_tokens,
                num_draft_tokens=num_drafted,
                num_accepted_tokens=num_accepted,
                num_preempted=len(batch.preempted),
                num_free_blocks=self.scheduler.block_manager.num_free_blocks,
                draft_ms=timer.elapsed_ms("draft"),
                target_ms=timer.elapsed_ms("target"),
                sample_ms=timer.elapsed_ms("sample"),
                step_ms=(time.perf_counter() - start) * 1e3,
            )
        )
        self._step_index += 1
        self._last_read_time = emit_time
        return finished

    def _on_scheduled(self, batch: ScheduledBatch, start: float) -> None:
        for request in batch.preempted:
            if self.proposer is not None:
                self.proposer.free(request.request_id)
        for request in batch.requests:
            if request.stats.first_scheduled_time is None:
                request.stats.first_scheduled_time = start

    def _prefill(self, requests, st: SamplingTensors, timer: PhaseTimer):
        inp = build_prefill_input(requests, self.block_size, self.device)
        timer.start("target")
        out = self.runner.prefill(inp)
        timer.stop("target")
        timer.start("sample")
        tokens = sample(out.logits, st)
        timer.stop("sample")
        tokens_cpu = tokens.tolist()  # the step's one host sync
        offset = 0
        for request in requests:
            num = request.num_tokens
            request.num_cached_tokens = num
            if self.needs_features:  # handed to the proposer where produced: it owns them until free()
                self.proposer.add_target_features(request.request_id, 0, out.features[offset : offset + num])
            offset += num
        return [[t] for t in tokens_cpu], 0, 0, inp.md.num_tokens

    def _decode(self, batch, st: SamplingTensors, timer: PhaseTimer, start: float):
        """Propose, verify, read back; None when the next round was launched ahead (read back next call)."""
        proposal = None
        if self.proposer is not None and any(batch.num_draft_tokens):
            timer.start("draft")
            proposal = self.proposer.propose(self._propose_input(batch, st))
            timer.stop("draft")
        launch = self._launch_verify(batch.requests, proposal, st, timer)
        inflight = self._round_ahead(batch, launch, st, timer, start)
        if inflight is not None:
            self._inflight_round = inflight
            return None
        output_rows, accepted = launch.rows()
        return self._read_verify(launch, output_rows, accepted, is_ahead=False)

    def _launch_verify(self, requests, proposal, st: SamplingTensors, timer: PhaseTimer) -> VerifyLaunch:
        inp = build_verify_input(requests, proposal, self.block_size, self.device, self.hooks)
        timer.start("target")
        out = self.runner.verify(inp)
        timer.stop("target")
        timer.start("sample")
        if proposal is not None and self.synthetic_conditional is not None:
            result = synthetic_verify(out.logits, inp.draft_token_ids, inp.num_draft_tokens,
                                      self.synthetic_conditional, self.synthetic_generator)
        else:
            result = self.verify_fn(out.logits, inp.draft_token_ids, inp.num_draft_tokens, inp.draft_probs, st)
        timer.stop("sample")
        # the step's one device->host copy: each row is the output tokens, then the number accepted
        host_rows, copied = copy_to_host(torch.cat([result.output_token_ids, result.num_accepted[:, None]], dim=1))
        return VerifyLaunch(tuple(requests), proposal, inp.md.num_tokens,
                            tuple(r.num_cached_tokens for r in requests), result.output_token_ids,
                            result.num_accepted, out.features, host_rows, copied)

    def _read_verify(self, launch: VerifyLaunch, output_rows, accepted, *, is_ahead: bool):
        """Advance each request by its verified tokens; (committed tokens per request, drafted, accepted, tokens).
        `is_ahead`: the next round was built from this verify on the device, which consumed its features."""
        requests, proposal = launch.requests, launch.proposal
        num_drafts = proposal.num_draft_tokens if proposal is not None else (0,) * len(requests)
        committed = []
        offset = 0
        for r, request in enumerate(requests):
            num_new = accepted[r] + 1
            if self.needs_features and not is_ahead:
                first = self.hooks.target_feature_rows(offset, num_new, launch.features.shape[0])
                self.proposer.add_target_features(request.request_id, request.num_cached_tokens,
                                                  launch.features[first : first + num_new])
            offset += 1 + num_drafts[r]
            request.num_cached_tokens += num_new
            request.stats.record_round(num_drafts[r], accepted[r])
            committed.append(output_rows[r][:num_new])
        if proposal is not None:
            self.proposer.on_verified(tuple(r.request_id for r in requests), tuple(accepted))
        return committed, sum(num_drafts), sum(accepted), launch.num_scheduled_tokens

    def _propose_input(self, batch, st: SamplingTensors) -> ProposeInput:
        requests = batch.requests
        return ProposeInput(
            request_ids=tuple(r.request_id for r in requests),
            token_ids=tuple(tuple(r.token_ids) for r in requests),
            num_draft_tokens=batch.num_draft_tokens,
            block_tables=tuple(tuple(r.block_table) for r in requests),
            sampling=st,
        )

    def _commit(self, request: Request, tokens: list[int], emit_time: float) -> str | None:
        reason = None
        num_emitted = 0
        for token in tokens:
            request.output_token_ids.append(token)
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
        if self.proposer is not None:
            self.proposer.free(request.request_id)
        del self._requests[request.request_id]
        return RequestOutput(
            request_id=request.request_id,
            prompt=request.prompt_text,
            prompt_token_ids=tuple(request.prompt_token_ids),
            output_token_ids=tuple(request.output_token_ids),
            text=self.stop_checker.final_text(request),
            finish_reason=reason,
            stats=request.stats,
        )

    def _sampling_tensors(self, requests) -> SamplingTensors:
        """Rebuilt only when the batch changes: decode steps of a steady batch reuse the device tensors."""
        key = tuple(map(id, requests))  # the cache holds the requests, so their ids cannot be reused meanwhile
        if self._sampling_cache is None or self._sampling_cache[1] != key:
            st = build_sampling_tensors(
                [r.sampling_params for r in requests], [r.generator for r in requests], self.vocab_size, self.device
            )
            self._sampling_cache = (tuple(requests), key, st)
        return self._sampling_cache[2]

    def run_until_done(self, on_finish=None) -> list[RequestOutput]:
        """Step until every added request finished, sleeping until future arrivals."""
        outputs: list[RequestOutput] = []
        while self.has_unfinished():
            finished = self.step()
            if not finished and not self.scheduler.running:
                next_arrival = self.scheduler.next_arrival()
                if next_arrival is not None:
                    time.sleep(max(0.0, next_arrival - time.perf_counter()))
            for output in finished:
                outputs.append(output)
                if on_finish is not None:
                    on_finish(output)
        return outputs
