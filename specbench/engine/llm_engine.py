"""The engine: requests in, finished requests out, settings between runs; each step runs through its step loop
(engine/step_loop.py)."""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable

import torch

from specbench.config import EngineConfig
from specbench.engine.builder import EngineParts, build_engine_parts
from specbench.engine.commit import Committer
from specbench.engine.inflight import Inflight
from specbench.engine.outputs import RequestOutput
from specbench.engine.request import Request
from specbench.engine.stats import RequestStats, StepStats
from specbench.engine.step_log import StepLog
from specbench.engine.step_loop import StepLoop
from specbench.engine.step_runner import StepRunner
from specbench.engine.stop import StopChecker
from specbench.engine.token_logprob import TokenLogprob
from specbench.errors import SpecbenchError
from specbench.grammar.book import GrammarBook
from specbench.recurrent.kernel_choice import FLA
from specbench.recurrent.tree_verify import HYBRID_TREE_FLA_REFUSAL
from specbench.runtime.cpu_threads import CpuThreads
from specbench.runtime.hooks import NO_HOOKS, PhaseHooks
from specbench.sampling_params import SamplingParams
from specbench.speculation.capabilities import CapturesDraftGraphs, CapturesTreeDraftGraphs, DraftsTrees, Proposer
from specbench.speculation.draft_shape import DraftShape
from specbench.speculation.tree.plan import tree_plan
from specbench.speculation.registry import methods_with
from specbench.speculation.sampling import make_generator




class LLMEngine:
    """The engine's API (requests in, finished requests out, settings between runs) around its step loop: the
    scheduler decides, the step runner executes, the committer commits (engine/step_loop.py)."""

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
        self.vocab_size = p.target.config.vocab_size
        self.block_size = config.block_size
        self.pool_tokens = p.num_kv_blocks * config.block_size
        self.hooks = p.hooks
        self.paths = p.paths  # the one record of which execution paths this engine took (execution_paths.py)
        synthetic_generator = None
        if config.synthetic_acceptance is not None:
            synthetic_generator = torch.Generator(device=self.device).manual_seed(config.seed)
        self.step_runner = StepRunner(
            p.runner, p.proposer, p.verify_fn, hooks=p.hooks, paths=p.paths, device=p.device,
            block_size=config.block_size, vocab_size=self.vocab_size, method=config.method, verifier=p.verifier,
            synthetic_rates=config.synthetic_acceptance, synthetic_generator=synthetic_generator,
            debug_invariants=config.debug_invariants,
            grammar=GrammarBook(p.tokenizer, self.vocab_size, p.stop_checker.eos_token_ids, p.hooks, p.paths))
        self.committer = Committer(p.scheduler, self.step_runner.free, p.stop_checker, p.hooks)
        self.log = StepLog()
        self.loop = StepLoop(p.scheduler, self.step_runner, self.committer, self.log, p.paths, p.device)
        self._cpu_threads = CpuThreads(config.cpu_threads)
        self._ids = itertools.count()
        self.async_scheduling = config.async_scheduling  # config's value until set_async_scheduling
        self._inflight: Inflight | None = None  # the step or round launched and not read back yet (inflight.py)

    @property
    def proposer(self) -> Proposer | None:
        """None: method none (plain decoding). The step runner holds it (tests swap it for a wrapper)."""
        return self.step_runner.proposer

    @proposer.setter
    def proposer(self, proposer: Proposer | None) -> None:
        self.step_runner.proposer = proposer

    @property
    def stop_checker(self) -> StopChecker:
        return self.committer.stop_checker

    @stop_checker.setter
    def stop_checker(self, checker: StopChecker) -> None:
        self.committer.stop_checker = checker

    @property
    def on_emission(self) -> Callable[[str, tuple[int, ...]], None] | None:
        """Called on the stepping thread with (request_id, tokens it committed this step) as each step commits:
        streaming servers forward tokens as they are emitted. None: only finished requests are reported."""
        return self.committer.on_emission

    @on_emission.setter
    def on_emission(self, callback: Callable[[str, tuple[int, ...]], None] | None) -> None:
        self.committer.on_emission = callback

    @property
    def step_stats(self) -> list[StepStats]:
        return self.log.step_stats

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
        if params.grammar is not None:
            self._check_grammar(params)
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
        if request_id in self.committer.requests:
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
        self.committer.requests[request_id] = request
        self.scheduler.add(request)
        return request_id

    def _check_grammar(self, params: SamplingParams) -> None:
        """Refuse a constrained request this engine cannot decode under its grammar, before it is queued."""
        self.step_runner.grammar.library.matcher(params.grammar)  # compiles it: a bad schema or pattern fails here

    def abort_request(self, request_id: str) -> bool:
        """Drop an unfinished request between steps: its KV and draft state are freed and it is never reported.
        False when it is not unfinished (already finished or unknown)."""
        request = self.committer.requests.pop(request_id, None)
        if request is None:
            return False
        self.scheduler.abort(request)
        self.step_runner.free(request_id)
        self.step_runner.forget_sampling()  # it may hold the aborted request's row
        return True

    def recover_from_failed_step(self) -> None:
        """After step() raised: forget any launched step and preempt every running request (KV freed; each
        recomputes its prompt and output so far when next scheduled), so the engine can step again. Aborting the
        request that caused the failure is the caller's decision (serve/engine_loop.py)."""
        self._inflight = None
        self.step_runner.forget_sampling()
        for request in self.scheduler.preempt_all():
            self.step_runner.free(request.request_id)

    def emitted_logprobs(self, request_id: str, num: int) -> tuple[tuple[TokenLogprob, ...] | None,
                                                                   tuple[TokenLogprob | None, ...] | None]:
        """(logprobs of an unfinished request's newest `num` tokens, its prompt logprobs), None where it did not
        ask: what an on_emission callback streams with the tokens it is handed."""
        request = self.committer.requests[request_id]
        newest = None if request.sampling_params.logprobs is None else tuple(request.output_logprobs[-num:])
        return newest, request.prompt_logprobs

    @property
    def num_steps(self) -> int:
        """k of the next rounds: the scheduler owns it (it reserves KV for k drafts); config.max_num_steps is the
        largest k the engine was built (graphs captured) for."""
        return self.scheduler.num_steps

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
        self._prepare_tree_graphs()

    @property
    def draft_shape(self) -> DraftShape:
        """The tree shape of the next rounds (eagle_topk 1 = chains of k = num_steps drafts)."""
        return self.scheduler.draft_shape

    def set_draft_shape(self, shape: DraftShape) -> None:
        """Change the draft tree's shape between runs, like set_num_steps (the scheduler owns it)."""
        if self.has_unfinished():
            raise RuntimeError("set_draft_shape needs an idle engine")
        if shape.is_tree and not isinstance(self.proposer, DraftsTrees):
            can = ", ".join(methods_with(DraftsTrees))
            raise SpecbenchError(f"eagle_topk {shape.eagle_topk} (tree drafts) is not supported by method "
                                 f"'{self.config.method}'; methods that draft trees: {can}")
        target = self.runner.model.config
        if shape.is_tree and target.is_hybrid and self.parts.recurrent_kernels == FLA:
            raise SpecbenchError(HYBRID_TREE_FLA_REFUSAL)
        # each layer kind says whether it verifies trees (full attention, Gated DeltaNet: recurrent/tree_verify.py)
        kinds = self.runner.model.layer_kinds.kinds
        if shape.is_tree and (not all(k.verifies_trees for k in kinds)
                              or target.has_attention_sinks or target.attn_logit_softcapping is not None):
            refused = sorted({str(k) for k in kinds if not k.verifies_trees})
            raise SpecbenchError("tree drafts need layers that verify trees (full attention, Gated DeltaNet); this "
                                 f"target has layers of {', '.join(refused) or 'attention sinks or soft-capped attention logits'}"
                                 "; use chains (eagle_topk 1)")
        self.scheduler.draft_shape = shape
        self._prepare_tree_graphs()

    def _prepare_tree_graphs(self) -> None:
        """Tree verify graphs for the rounds the current DraftShape and k draft (root + num_draft_tokens rows per
        request) and the drafter's tree draft graphs for that plan, captured here, between runs; a no-op for chains
        or while CUDA graphs are off."""
        shape = self.scheduler.draft_shape
        if shape.is_tree and self.num_steps > 0 and isinstance(self.proposer, DraftsTrees):
            plan = tree_plan(shape, self.num_steps)
            self.runner.prepare_tree_graphs(plan.num_draft_tokens + 1)
            if isinstance(self.proposer, CapturesTreeDraftGraphs) and self.runner.graphs is not None:
                self.proposer.prepare_tree_draft_graphs(plan)

    def set_synthetic_acceptance(self, rates: tuple[float, ...]) -> None:
        """Change the forced acceptance rates between runs (benchmarks compare chains and trees at their own
        calibrated rates on one engine). Only on an engine built with --synthetic-acceptance: a lossless engine
        never turns into a forced one; the rates are validated as the config's (one per step up to max_num_steps)."""
        if self.has_unfinished():
            raise RuntimeError("set_synthetic_acceptance needs an idle engine")
        if self.config.synthetic_acceptance is None:
            raise SpecbenchError("set_synthetic_acceptance needs an engine built with --synthetic-acceptance")
        self.config = dataclasses.replace(self.config, synthetic_acceptance=tuple(rates))
        self.step_runner.set_synthetic_rates(self.config.synthetic_acceptance)

    def set_async_scheduling(self, is_on: bool) -> None:
        """Switch overlapped plain decoding between runs (benchmarks compare both on one engine)."""
        if self.has_unfinished():
            raise RuntimeError("set_async_scheduling needs an idle engine")
        self.async_scheduling = is_on

    def set_chunked_prefill(self, is_on: bool, max_num_batched_tokens: int | None = None) -> None:
        """Switch chunked prefill (and its step token budget) between runs: benchmarks compare both on one engine."""
        if self.has_unfinished():
            raise RuntimeError("set_chunked_prefill needs an idle engine")
        if max_num_batched_tokens is not None:
            if max_num_batched_tokens < 1:
                raise SpecbenchError(f"max_num_batched_tokens must be >= 1, got {max_num_batched_tokens}")
            self.scheduler.max_num_batched_tokens = max_num_batched_tokens
        self.scheduler.enable_chunked_prefill = is_on

    def paths_taken(self) -> frozenset[str]:
        """Registered execution paths (execution_paths.py) this engine took since it was built or reset_paths()."""
        return self.paths.taken()

    def reset_paths(self) -> None:
        self.paths.reset()

    def has_unfinished(self) -> bool:
        """Requests waiting or running, or a launched step still to read back."""
        return self._inflight is not None or self.scheduler.has_unfinished()

    # ---- the step loop --------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        """Run one engine step; returns requests that finished in it (possibly none).

        With async scheduling a plain decode step (or an EAGLE round drafted ahead) is launched and read back on
        the next call, after that call has launched its successor (engine/inflight.py): the results of a step may
        come one call late."""
        self._cpu_threads.on_step()
        last, self._inflight = self._inflight, None
        finished, self._inflight = self.loop.step(last, is_async=self.async_scheduling)
        return finished

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
