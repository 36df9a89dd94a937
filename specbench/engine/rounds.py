"""One synchronous step of the target: a prefill, or a decode round (propose, verify, read back)."""

from __future__ import annotations

import torch

from specbench.device_copy import to_device
from specbench.engine.inputs import build_prefill_input, build_verify_input
from specbench.engine.logprobs import (StepLogprobs, logprob_table, prompt_logprobs_of, prompt_rows, raw_logprobs,
                                       verify_rows, wanted_top)
from specbench.engine.verify_launch import VerifyLaunch, copy_to_host
from specbench.engine.timing import PhaseTimer
from specbench.speculation.proposer import ProposeInput
from specbench.speculation.sampling import SamplingTensors, sample
from specbench.speculation.synthetic import synthetic_verify


class TargetRounds:
    """LLMEngine's prefill and decode rounds (a mixin: it shares the engine's state and commit path)."""

    def _prefill(self, requests, st: SamplingTensors, timer: PhaseTimer):
        inp = build_prefill_input(requests, self.block_size, self.device)
        timer.start("target")
        out = self.runner.prefill(inp)
        timer.stop("target")
        timer.start("sample")
        tokens = sample(out.logits, st)
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
        offset = 0
        for request in requests:
            num = request.num_tokens
            request.num_cached_tokens = num
            if self.needs_features:  # handed to the proposer where produced: it owns them until free()
                self.proposer.add_target_features(request.request_id, 0, out.features[offset : offset + num])
            offset += num
        return [[t] for t in tokens_cpu], 0, 0, inp.md.num_tokens, logprobs

    def _decode(self, batch, st: SamplingTensors, timer: PhaseTimer, start: float):
        """Propose, verify, read back; None when the next round was launched ahead (read back next call)."""
        if self._is_tree_round(batch):  # synchronous, eager (engine/tree_round.py)
            return self._tree_round(batch, st, timer)
        proposal = None
        if self.proposer is not None and any(batch.num_draft_tokens):
            self.paths.record(self._proposer_path)
            timer.start("draft")
            proposal = self.proposer.propose(self._propose_input(batch, st))
            timer.stop("draft")
        launch = self._launch_verify(batch.requests, proposal, st, timer)
        inflight = self._round_ahead(batch, launch, timer, start)
        if inflight is not None:
            self._inflight_round = inflight
            return None
        self.paths.record("decode.sync" if proposal is None else "spec.sync_round")
        output_rows, accepted = launch.rows()
        return (*self._read_verify(launch, output_rows, accepted, is_ahead=False), launch.logprobs)

    def _launch_verify(self, requests, proposal, st: SamplingTensors, timer: PhaseTimer,
                       newest_token_ids: torch.Tensor | None = None) -> VerifyLaunch:
        """Enqueue a verify (a plain decode step without a proposal) and its one copy to the host.
        `newest_token_ids` [num_reqs]: the previous step's tokens still on the device (overlapped decoding)."""
        inp = build_verify_input(requests, proposal, self.block_size, self.device, self.hooks, newest_token_ids)
        timer.start("target")
        out = self.runner.verify(inp)
        timer.stop("target")
        num_top = wanted_top(requests)
        is_logprobs = any(n is not None for n in num_top)
        # before the verifier runs: the logits are read as the model produced them, whatever it does with them
        row_logprobs = raw_logprobs(out.logits) if is_logprobs else None
        timer.start("sample")
        if proposal is not None and self.synthetic_conditional is not None:
            self.paths.record("verify.synthetic")
            result = synthetic_verify(out.logits, inp.draft_token_ids, inp.num_draft_tokens,
                                      self.synthetic_conditional, self.synthetic_generator)
        else:
            self.paths.record(self._verify_path)
            result = self.verify_fn(out.logits, inp.draft_token_ids, inp.num_draft_tokens, inp.draft_probs, st)
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
                self.proposer.add_target_features(request.request_id, request.num_cached_tokens,
                                                  launch.features[offset : offset + num_new])
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
