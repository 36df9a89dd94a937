"""Executes one step on the device for the step loop (engine/step_loop.py): a prefill, a proposal, a verify (or plain
decode step) with its one copy to the host, the read-back of a verify, a round drafted ahead. It decides nothing
about which requests run (the scheduler does) and commits nothing to their outputs (engine/commit.py does)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch

from specbench.device_copy import to_device
from specbench.engine.inputs import build_prefill_input, build_verify_input
from specbench.engine.logprobs import (StepLogprobs, logprob_table, prompt_logprobs_of, prompt_rows, raw_logprobs,
                                       verify_rows, wanted_top)
from specbench.engine.model_runner import TargetRunner
from specbench.engine.request import Request
from specbench.engine.scheduler import ScheduledBatch
from specbench.engine.state_attach import commit_states, with_state_rows
from specbench.engine.verify_launch import VerifyLaunch, copy_to_host
from specbench.engine.timing import PhaseTimer
from specbench.execution_paths import PathRecorder, proposer_path
from specbench.grammar.book import GrammarBook
from specbench.grammar.draft_mask import DraftMask
from specbench.runtime.hooks import PhaseHooks
from specbench.speculation.capabilities import Proposer
from specbench.speculation.proposer import DraftProposal, ProposeInput
from specbench.speculation.sampling import SamplingTensors, build_sampling_tensors, sample
from specbench.speculation.synthetic.chain import conditional_rates, synthetic_verify
from specbench.speculation.synthetic.tree import engine_table


@dataclass(frozen=True, slots=True)
class StepResult:
    """A step read back on the host (a prefill, a verify, a tree round): what the committer commits and the step log
    records."""

    committed: list[list[int]]  # [num_reqs][num_new] host ints: each request's tokens to commit, in batch order
    num_drafted: int  # draft tokens proposed over the batch (0 for a prefill or a plain decode step)
    num_accepted: int  # of those, accepted
    num_scheduled_tokens: int  # tokens the target's forward ran over
    logprobs: StepLogprobs | None  # the emitted tokens' target logprobs, when a request asked


class StepRunner:
    """The device work of a step: target phases, proposals, verification and each step's one host copy."""

    def __init__(self, target_runner: TargetRunner, proposer: Proposer | None, verify_fn: Callable, *,
                 hooks: PhaseHooks, paths: PathRecorder, device: torch.device, block_size: int, vocab_size: int,
                 method: str, verifier: str, synthetic_rates: tuple[float, ...] | None,
                 synthetic_generator: torch.Generator | None, debug_invariants: bool = False,
                 grammar: GrammarBook | None = None) -> None:
        self.target_runner = target_runner  # the target model's phases over the paged KV cache
        self.proposer = proposer  # None: method none (plain decoding); the engine's one reference to it
        self.verify_fn = verify_fn  # specbench.speculation.verify.chain.verify or its Triton twin
        self.hooks = hooks
        self.paths = paths  # the one record of which execution paths this engine took (execution_paths.py)
        self.device = device
        self.block_size = block_size
        # Debug invariants: device-built layouts (tree verify inputs) also carry host copies for INV-TREE (syncs).
        self.debug_invariants = debug_invariants
        self.vocab_size = vocab_size
        self._verify_path = f"verify.{verifier}"
        self.proposer_path = proposer_path(method)  # the execution path its rounds record
        # Forced acceptance (--synthetic-acceptance): the unconditional per-position rates, else None. Chains verify
        # against [k] P(accept draft j | drafts before it accepted); trees against the (depth, rank) table of
        # speculation/synthetic/tree.py, built per tree shape.
        self.synthetic_generator = synthetic_generator
        self.set_synthetic_rates(synthetic_rates)
        self._sampling_cache: tuple[tuple, tuple[int, ...], SamplingTensors] | None = None  # (requests, ids, tensors)
        self.grammar = grammar  # every constrained request's grammar state (grammar/book.py); None: none kept

    def set_synthetic_rates(self, rates: tuple[float, ...] | None) -> None:
        """The forced rates of the next rounds (validated by EngineConfig); drops the tables of the old ones."""
        self.synthetic_rates = rates
        self.synthetic_conditional = (None if rates is None else  # [len(rates)]
                                      to_device(conditional_rates(rates), torch.float32, self.device))
        self._synthetic_tree_tables: dict[tuple[int, int], torch.Tensor] = {}  # (depth, topk) -> [depth, topk]

    def synthetic_tree_table(self, depth: int, topk: int) -> torch.Tensor:
        """[depth, topk] conditional acceptance per (depth, sibling rank) of a tree round under --synthetic-acceptance
        (synthetic.tree.engine_table); built once per shape, on the device."""
        if self.synthetic_rates is None:
            raise RuntimeError("synthetic_tree_table needs --synthetic-acceptance")
        key = (depth, topk)
        if key not in self._synthetic_tree_tables:
            self._synthetic_tree_tables[key] = engine_table(self.synthetic_rates, depth, topk, device=self.device)
        return self._synthetic_tree_tables[key]

    def sampling_tensors(self, requests) -> SamplingTensors:
        """Rebuilt only when the batch changes: decode steps of a steady batch reuse the device tensors."""
        key = tuple(map(id, requests))  # the cache holds the requests, so their ids cannot be reused meanwhile
        if self._sampling_cache is None or self._sampling_cache[1] != key:
            st = build_sampling_tensors(
                [r.sampling_params for r in requests], [r.generator for r in requests], self.vocab_size, self.device
            )
            self._sampling_cache = (tuple(requests), key, st)
        return self._sampling_cache[2]

    def free(self, request_id: str) -> None:
        """Forget a finished, aborted or preempted request's draft state (and a hybrid target's state slot)."""
        if self.proposer is not None:
            self.proposer.free(request_id)
        if self.grammar is not None:
            self.grammar.free(request_id)
        if self.states is not None:
            self.states.free(request_id)

    def is_constrained(self, requests) -> bool:
        """Whether a request of `requests` decodes under a grammar (its rows are masked, its state settled)."""
        return self.grammar is not None and GrammarBook.is_constrained(requests)

    @property
    def states(self):
        """A hybrid target's recurrent-state slots (recurrent/state_cache.py), or None."""
        return self.target_runner.kv_cache.states

    def forget_sampling(self) -> None:
        """Drop the cached sampling tensors (they may hold an aborted or preempted request's row)."""
        self._sampling_cache = None

    def prefill(self, requests: tuple[Request, ...], st: SamplingTensors, timer: PhaseTimer, *,
                needs_features: bool) -> StepResult:
        """Run the prompts: each request's first token, nothing drafted.
        `needs_features`: the proposer consumes target features (handed over here, where they are produced)."""
        inp = build_prefill_input(requests, self.block_size, self.device)
        inp = with_state_rows(inp, self.states, [r.request_id for r in requests], 0, self.paths, self.hooks)
        timer.start("target")
        out = self.target_runner.prefill(inp)
        timer.stop("target")
        timer.start("sample")
        is_constrained = self.is_constrained(requests)
        logits = self.grammar.masked_logits(out.logits, requests, [[]] * len(requests)) if is_constrained \
            else out.logits
        tokens = sample(logits, st)
        timer.stop("sample")
        logprobs = None
        num_top = wanted_top(requests)
        if any(n is not None for n in num_top):  # asked for: a second copy, in the step that syncs anyway
            max_top = max(n for n in num_top if n is not None)
            table = logprob_table(raw_logprobs(out.logits), tokens, max_top).cpu()
            logprobs = StepLogprobs(table, max_top, tuple(range(len(requests))), num_top)
        if out.prompt_logits is not None:
            _, targets, spans = prompt_rows(requests)
            prompt_logprobs_of(out.prompt_logits, targets, spans, requests)
        tokens_cpu = tokens.tolist()  # the step's one host sync
        if is_constrained:
            self.grammar.settle(requests, [0] * len(requests), [[t] for t in tokens_cpu])
        offset = 0
        for request in requests:
            start, num = request.num_cached_tokens, request.num_tokens - request.num_cached_tokens  # past a prefix hit
            request.num_cached_tokens = request.num_tokens
            if needs_features:  # handed to the proposer where produced: it owns them until free()
                self.proposer.add_target_features(request.request_id, start, out.features[offset : offset + num])
            offset += num
        return StepResult([[t] for t in tokens_cpu], 0, 0, inp.md.num_tokens, logprobs)

    def propose(self, batch: ScheduledBatch, st: SamplingTensors, timer: PhaseTimer) -> DraftProposal | None:
        """The proposer's drafts for a decode batch, or None when it asks for none (plain decoding)."""
        if self.proposer is None or not any(batch.num_draft_tokens):
            return None
        self.paths.record(self.proposer_path)
        timer.start("draft")
        inp = self.propose_input(batch, st)
        draft_mask = None
        if self.is_constrained(batch.requests) and self.grammar.is_drafting_masked:
            draft_mask = DraftMask(self.grammar, batch.requests)
            inp = dataclasses.replace(inp, draft_mask=draft_mask)
        proposal = self.proposer.propose(inp)
        if draft_mask is not None:
            draft_mask.finish()
            proposal = self._drafts_under_mask(batch.requests, proposal)
        timer.stop("draft")
        return proposal

    def _drafts_under_mask(self, requests, proposal: DraftProposal) -> DraftProposal:
        """Each constrained request's drafts cut at the first token its grammar refuses: the verifier would reject
        it and every draft after it. Reads the drafts on the host (a sync with the drafter)."""
        cut = self.grammar.cut_drafts(requests, self.draft_rows(proposal))
        if tuple(cut) == proposal.num_draft_tokens:
            return proposal
        self.paths.record("grammar.draft_cut")
        return DraftProposal(proposal.draft_token_ids, tuple(cut), proposal.draft_probs, proposal.parents)

    @staticmethod
    def draft_rows(proposal: DraftProposal | None, num_reqs: int = 0) -> list[list[int]]:
        """[num_reqs][num_draft_tokens_r] the drafts on the host (none without a proposal)."""
        if proposal is None:
            return [[] for _ in range(num_reqs)]
        rows = proposal.draft_token_ids.tolist()
        return [row[:n] for row, n in zip(rows, proposal.num_draft_tokens)]

    def launch_verify(self, requests, proposal, st: SamplingTensors, timer: PhaseTimer,
                       newest_token_ids: torch.Tensor | None = None) -> VerifyLaunch:
        """Enqueue a verify (a plain decode step without a proposal) and its one copy to the host.
        `newest_token_ids` [num_reqs]: the previous step's tokens still on the device (overlapped decoding)."""
        inp = build_verify_input(requests, proposal, self.block_size, self.device, self.hooks, newest_token_ids)
        inp = with_state_rows(inp, self.states, [r.request_id for r in requests], len(requests),
                               self.paths, self.hooks)
        is_constrained = self.is_constrained(requests)
        # read before the target's forward is enqueued, so the masks are built on the host while it runs
        draft_rows = self.draft_rows(proposal, len(requests)) if is_constrained else None
        timer.start("target")
        out = self.target_runner.verify(inp)
        timer.stop("target")
        num_top = wanted_top(requests)
        is_logprobs = any(n is not None for n in num_top)
        # before the verifier runs: the logits are read as the model produced them, whatever it does with them
        row_logprobs = raw_logprobs(out.logits) if is_logprobs else None
        timer.start("sample")
        logits = self.grammar.masked_logits(out.logits, requests, draft_rows) if is_constrained else out.logits
        result = self.run_verifier(logits, inp, proposal, st)
        commit_states(self.states, inp.md, result.num_accepted, self.paths, self.hooks)
        timer.stop("sample")
        # the step's one device->host copy: each row is the output tokens, then the number accepted
        host_rows, copied = copy_to_host(torch.cat([result.output_token_ids, result.num_accepted[:, None]], dim=1))
        logprobs = None
        if row_logprobs is not None:
            num_drafts = inp.num_draft_tokens.tolist()
            gather, first_row = verify_rows(num_drafts, result.output_token_ids.shape[1])
            tokens = result.output_token_ids.reshape(-1)[to_device(gather, torch.int64, self.device)]
            rows = self.hooks.logprob_rows(num_drafts)
            row_logprobs = (row_logprobs[: len(gather)] if rows is None
                            else row_logprobs[to_device(rows, torch.int64, self.device)])
            max_top = max(n for n in num_top if n is not None)
            table, table_copied = copy_to_host(logprob_table(row_logprobs, tokens, max_top))
            logprobs = StepLogprobs(table, max_top, first_row, num_top, table_copied)
        return VerifyLaunch(tuple(requests), proposal, inp.md.num_tokens,
                            tuple(r.num_cached_tokens for r in requests), result.output_token_ids,
                            result.num_accepted, out.features, host_rows, copied, logprobs)

    def run_verifier(self, logits: torch.Tensor, inp, proposal: DraftProposal | None, st: SamplingTensors):
        """The verifier over a verify's `logits` [num_verify_rows, vocab] (inp: its VerifyInput or MixedInput):
        the forced rates under --synthetic-acceptance, else the engine's verify function."""
        if proposal is not None and self.synthetic_conditional is not None:
            self.paths.record("verify.synthetic")
            return synthetic_verify(logits, inp.draft_token_ids, inp.num_draft_tokens, self.synthetic_conditional,
                                    self.synthetic_generator)
        self.paths.record(self._verify_path)
        return self.verify_fn(logits, inp.draft_token_ids, inp.num_draft_tokens, inp.draft_probs, st)

    def read_verify(self, launch: VerifyLaunch, output_rows, accepted, *, hands_features: bool) -> StepResult:
        """Advance each request by its verified tokens (logprobs: the launch's).
        `hands_features`: the proposer consumes target features and no round drafted ahead from this verify on the
        device consumed them already."""
        requests, proposal = launch.requests, launch.proposal
        num_drafts = proposal.num_draft_tokens if proposal is not None else (0,) * len(requests)
        committed = []
        offset = 0
        for r, request in enumerate(requests):
            num_new = accepted[r] + 1
            if hands_features:
                self.proposer.add_target_features(request.request_id, request.num_cached_tokens,
                                                  launch.features[offset : offset + num_new])
            offset += 1 + num_drafts[r]
            request.num_cached_tokens += num_new
            request.stats.record_round(num_drafts[r], accepted[r])
            committed.append(output_rows[r][:num_new])
        if proposal is not None:
            self.proposer.on_verified(tuple(r.request_id for r in requests), tuple(accepted))
        if self.is_constrained(requests):
            self.grammar.settle(requests, accepted, committed)
        return StepResult(committed, sum(num_drafts), sum(accepted), launch.num_scheduled_tokens, launch.logprobs)

    def draft_ahead(self, batch: ScheduledBatch, launch: VerifyLaunch) -> tuple[torch.Tensor, PhaseTimer] | None:
        """Enqueue the next round's drafting from `launch`'s outputs still on the device (the step loop reserved its
        KV): (its drafts [num_reqs, k] on the device, the timer of its "draft" phase), or None when the proposer
        cannot build this round there."""
        ahead_timer = PhaseTimer(self.device)
        ahead_timer.start("draft")
        draft_ids = self.proposer.propose_ahead(
            tuple(r.request_id for r in batch.requests), launch.newest_positions,
            tuple(tuple(r.block_table) for r in batch.requests), launch.output_token_ids, launch.num_accepted,
            launch.features)
        ahead_timer.stop("draft")
        if draft_ids is None:
            return None
        self.paths.record("eagle.ahead")
        self.paths.record(self.proposer_path)
        return draft_ids, ahead_timer

    def confirm_ahead(self, launch: VerifyLaunch, output_rows, accepted, live: list[int]) -> None:
        """The host read `launch`, from which a round was drafted ahead: tell the proposer each request's tokens
        once verified, for the requests `live` (rows of the batch), also for one that a stop condition ends now."""
        self.proposer.confirm_ahead(
            ProposeInput(
                request_ids=tuple(launch.requests[r].request_id for r in live),
                token_ids=tuple((*launch.requests[r].token_ids, *output_rows[r][: accepted[r] + 1]) for r in live),
                num_draft_tokens=tuple(launch.proposal.num_draft_tokens[r] for r in live),
                block_tables=tuple(tuple(launch.requests[r].block_table) for r in live),
                sampling=self.sampling_tensors(launch.requests)),
            launch.features, tuple(accepted[r] for r in live), rows_of_request=tuple(live))

    def propose_input(self, batch, st: SamplingTensors) -> ProposeInput:
        requests = batch.requests
        return ProposeInput(
            request_ids=tuple(r.request_id for r in requests),
            token_ids=tuple(tuple(r.token_ids) for r in requests),
            num_draft_tokens=batch.num_draft_tokens,
            block_tables=tuple(tuple(r.block_table) for r in requests),
            sampling=st,
        )
