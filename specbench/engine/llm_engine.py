"""The step loop: schedule, propose, verify (or prefill), commit, emit."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import torch

from specbench.config import EngineConfig
from specbench.engine.builder import EngineParts, build_engine_parts
from specbench.engine.logprobs import StepLogprobs
from specbench.engine.token_logprob import TokenLogprob
from specbench.engine.outputs import RequestOutput
from specbench.engine.overlap import InflightDecode, OverlappedDecode
from specbench.engine.round_overlap import InflightRound, OverlappedRounds
from specbench.engine.rounds import TargetRounds
from specbench.engine.tree_round import TreeRounds
from specbench.engine.request import Request, RequestStatus
from specbench.engine.scheduler import ScheduledBatch
from specbench.engine.stats import RequestStats, StepStats
from specbench.engine.timing import PhaseTimer
from specbench.errors import SpecbenchError
from specbench.runtime.cpu_threads import CpuThreads
from specbench.runtime.hooks import NO_HOOKS, PhaseHooks
from specbench.sampling_params import SamplingParams
from specbench.speculation.capabilities import CapturesDraftGraphs, ConsumesTargetFeatures, DraftsTrees
from specbench.speculation.draft_shape import DraftShape
from specbench.speculation.registry import methods_with
from specbench.speculation.sampling import SamplingTensors, build_sampling_tensors, make_generator
from specbench.speculation.synthetic import conditional_rates


class LLMEngine(TargetRounds, TreeRounds, OverlappedDecode, OverlappedRounds):
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
        self.paths = p.paths  # the one record of which execution paths this engine took (execution_paths.py)
        self._verify_path = f"verify.{p.verifier}"
        self._proposer_path = f"proposer.{config.method}"
        self.synthetic_conditional = None
        if config.synthetic_acceptance is not None:
            rates = conditional_rates(config.synthetic_acceptance)
            self.synthetic_conditional = torch.tensor(rates, dtype=torch.float32, device=self.device)
            self.synthetic_generator = torch.Generator(device=self.device).manual_seed(config.seed)
        self.step_stats: list[StepStats] = []
        self._cpu_threads = CpuThreads(config.cpu_threads)
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
        needed = min(len(token_ids) + params.max_tokens, max_len) + self.scheduler.num_round_positions + 1
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

    def recover_from_failed_step(self) -> None:
        """After step() raised: forget any launched step and preempt every running request (KV freed; each
        recomputes its prompt and output so far when next scheduled), so the engine can step again. Aborting the
        request that caused the failure is the caller's decision (serve/engine_loop.py)."""
        self._inflight = None
        self._inflight_round = None
        self._sampling_cache = None
        for request in self.scheduler.preempt_all():
            if self.proposer is not None:
                self.proposer.free(request.request_id)

    def emitted_logprobs(self, request_id: str, num: int) -> tuple[tuple[TokenLogprob, ...] | None,
                                                                   tuple[TokenLogprob | None, ...] | None]:
        """(logprobs of an unfinished request's newest `num` tokens, its prompt logprobs), None where it did not
        ask: what an on_emission callback streams with the tokens it is handed."""
        request = self._requests[request_id]
        newest = None if request.sampling_params.logprobs is None else tuple(request.output_logprobs[-num:])
        return newest, request.prompt_logprobs

    @property
    def num_steps(self) -> int:
        """k of the next rounds: the scheduler owns it (it reserves KV for k drafts); config.max_num_steps is the
        largest k the engine was built (graphs captured) for."""
        return self.scheduler.num_steps

    @property
    def needs_features(self) -> bool:
        return isinstance(self.proposer, ConsumesTargetFeatures) and self.num_steps > 0

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
        if graphs is not None and isinstance(self.proposer, CapturesDraftGraphs):
            self.proposer.prepare_cuda_graphs(num_steps)

    @property
    def draft_shape(self) -> DraftShape:
        """The tree shape of the next rounds (eagle_topk 1 = chains of k = num_steps drafts)."""
        return self.scheduler.draft_shape

    def set_draft_shape(self, shape: DraftShape) -> None:
        """Change the draft tree's shape between runs, like set_num_steps (the scheduler owns it)."""
        if self.has_unfinished():
            raise RuntimeError("set_draft_shape needs an idle engine")
        if shape.is_tree and not isinstance(self.proposer, DraftsTrees):
            raise SpecbenchError(f"eagle_topk {shape.eagle_topk} (tree drafts) is not supported by method "
                                 f"'{self.config.method}'; methods that draft trees: {', '.join(methods_with(DraftsTrees))}")
        target = self.runner.model.config
        if shape.is_tree and (not self.runner.model.layer_kinds.is_all_full or target.has_attention_sinks
                              or target.attn_logit_softcapping is not None):
            raise SpecbenchError("tree drafts need plain full-attention layers; this target has sliding-window "
                                 "layers, attention sinks or soft-capped attention logits")
        if shape.is_tree and self.synthetic_conditional is not None:
            raise SpecbenchError("synthetic acceptance forces per-position chain acceptance; it has no tree form yet")
        self.scheduler.draft_shape = shape

    def set_async_scheduling(self, is_on: bool) -> None:
        """Switch overlapped plain decoding between runs (benchmarks compare both on one engine)."""
        if self.has_unfinished():
            raise RuntimeError("set_async_scheduling needs an idle engine")
        self.async_scheduling = is_on

    def paths_taken(self) -> frozenset[str]:
        """Registered execution paths (execution_paths.py) this engine took since it was built or reset_paths()."""
        return self.paths.taken()

    def reset_paths(self) -> None:
        self.paths.reset()

    def has_unfinished(self) -> bool:
        """Requests waiting or running, or a launched step still to read back."""
        return self._inflight is not None or self._inflight_round is not None or self.scheduler.has_unfinished()

    # ---- the step loop --------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        """Run one engine step; returns requests that finished in it (possibly none).

        With async scheduling a plain decode step is launched and read back on the next call, after that call
        has launched its successor (engine/overlap.py): the results of a step may come one call late."""
        self._cpu_threads.on_step()
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
            committed, num_drafted, num_accepted, num_tokens, logprobs = self._prefill(batch.requests, st, timer)
        else:
            decoded = self._decode(batch, st, timer, start)
            if decoded is None:
                return []
            committed, num_drafted, num_accepted, num_tokens, logprobs = decoded
        emit_time = time.perf_counter()
        finished = self._commit_all(batch.requests, committed, emit_time, logprobs)
        self._record_step(timer, start, time.perf_counter(), "prefill" if batch.is_prefill else "decode",
                          len(batch.requests), num_tokens, num_drafted, num_accepted, len(batch.preempted),
                          self.scheduler.block_manager.num_free_blocks, read_time=emit_time)
        return finished

    def _commit_all(self, requests, committed, emit_time: float,
                    logprobs: StepLogprobs | None = None) -> list[RequestOutput]:
        """Commit each request's tokens of one step (a request aborted since its launch is skipped); the finished.
        `logprobs`: the step's target logprobs, when a request in it asked."""
        finished = []
        for r, (request, tokens) in enumerate(zip(requests, committed)):
            if request.status is not RequestStatus.RUNNING:
                continue
            token_logprobs = None if logprobs is None else logprobs.for_request(r, tokens)
            reason = self._commit(request, tokens, emit_time, token_logprobs)
            if reason is not None:
                finished.append(self._finish(request, reason))
        return finished

    def _record_step(self, timer: PhaseTimer, start: float, end: float, phase: str, num_reqs: int, num_tokens: int,
                     num_drafted: int, num_accepted: int, num_preempted: int, num_free_blocks: int, *,
                     read_time: float, is_overlapped: bool = False) -> None:
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
            )
        )
        self._step_index += 1
        self._last_read_time = read_time

    def _on_scheduled(self, batch: ScheduledBatch, start: float) -> None:
        if batch.preempted:
            self.paths.record("preemption")
        for request in batch.preempted:
            if self.proposer is not None:
                self.proposer.free(request.request_id)
        for request in batch.requests:
            if request.stats.first_scheduled_time is None:
                request.stats.first_scheduled_time = start

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
            logprobs=None if request.sampling_params.logprobs is None else tuple(request.output_logprobs),
            prompt_logprobs=request.prompt_logprobs,
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
