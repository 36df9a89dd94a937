"""Condition-triggered faults (issue 44): each corrupts a speculative round's output only under one condition the
gentle gate never creates (a batch of 8, positions past the window, a batch size between CUDA-graph capture sizes,
a batch mixing zero-draft and drafting requests), or silently turns drafting off. Each passes `specbench gate`
(one request at a time, short prompts, a cold cache) and must fail `specbench stress` at the right condition; `specbench serve
--inject` serves them so the whole chain is tested over HTTP too.

Corruption is the silent kind: the recovered/bonus token is replaced by the target's second choice at its row, a
plausible token (HTTP 200, valid text) that greedy output with speculation off never has."""

from __future__ import annotations

from collections.abc import Callable

from specbench.faults.fault import Fault
from specbench.faults.output_rewrite import rewrite_output_token
from specbench.faults.path_mutant import wrap_method
from specbench.faults.verifier_mutant import VerifierMutant
from specbench.runtime.cuda_graph import batch_buckets
from specbench.speculation.capabilities import Proposer

FULL_ATTENTION_REACH = 512  # where "past the window" starts on a target without a sliding window


class ConditionalCorruption(VerifierMutant):
    """Corrupts request r of a speculative round when `fires(r)` holds for the round being verified."""

    eager_drafting = False  # the production drafting path: only the condition differs from a clean engine

    def __init__(self) -> None:
        self._first_positions: list[int] = []  # [num_reqs] the round's query start per request (verify_slot_mapping)
        self._round_drafts: list[int] = []  # [num_reqs] drafts per request of the round being verified

    def verify_slot_mapping(self, block_tables, positions, num_query, block_size):
        starts, at = [], 0
        for n in num_query:
            starts.append(positions[at])
            at += n
        self._first_positions = starts
        return None  # each position's own slot: the KV stays right, only the emitted token goes wrong

    def fires(self, r: int, num_drafts: list[int]) -> bool:
        raise NotImplementedError

    def wrap_verifier(self, verify_fn: Callable) -> Callable:
        def second_choice(target_logits, st, r, first_row, num_draft, num_accepted):
            if num_draft == 0:
                return None
            if not self.fires(r, self._round_drafts):
                return None
            return target_logits[first_row + num_accepted].topk(2).indices[1]

        rewrite = rewrite_output_token(verify_fn, second_choice)

        def verify(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st):
            self._round_drafts = num_draft_tokens.tolist()
            return rewrite(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st)

        return verify


class CorruptAtBatch8(ConditionalCorruption):
    fault = Fault("corrupt-at-batch-8", "corrupts a speculative round's bonus token only when the batch holds >= 8 "
                  "requests", "", "stress", Proposer)

    def fires(self, r: int, num_drafts: list[int]) -> bool:
        return len(num_drafts) >= 8


class CorruptPastWindow(ConditionalCorruption):
    fault = Fault("corrupt-past-window", "corrupts a speculative round's bonus token only past the target's sliding "
                  f"window (past {FULL_ATTENTION_REACH} tokens on a full-attention target)", "", "stress", Proposer)

    def install(self, engine) -> None:
        windows = [k.kv_window for k in engine.parts.target.config.attention_kinds if k.kv_window is not None]
        self.reach = min(windows) if windows else FULL_ATTENTION_REACH
        super().install(engine)

    def fires(self, r: int, num_drafts: list[int]) -> bool:
        return r < len(self._first_positions) and self._first_positions[r] >= self.reach


class CorruptOffCapture(ConditionalCorruption):
    fault = Fault("corrupt-off-capture", "corrupts a speculative round's bonus token only when the batch size lies "
                  "between CUDA-graph capture sizes (padded rows)", "", "stress", Proposer)

    def install(self, engine) -> None:
        graphs = engine.runner.graphs
        self.sizes = set(graphs.buckets if graphs is not None else batch_buckets(engine.config.max_concurrency))
        super().install(engine)

    def fires(self, r: int, num_drafts: list[int]) -> bool:
        return len(num_drafts) not in self.sizes


class CorruptZeroDraftMix(ConditionalCorruption):
    fault = Fault("corrupt-zero-draft-mix", "corrupts a drafting request's bonus token only in rounds where another "
                  "request drafted nothing (stale state of zero-draft rows)", "", "stress", Proposer)

    def fires(self, r: int, num_drafts: list[int]) -> bool:
        return num_drafts[r] > 0 and 0 in num_drafts


class CorruptOnPrefixHit(ConditionalCorruption):
    fault = Fault("corrupt-on-prefix-hit", "corrupts a speculative round's bonus token only for requests whose "
                  "prompt was served from the prefix cache (draft or target KV wrong on hits only)", "", "stress",
                  Proposer)

    def install(self, engine) -> None:
        self._requests: tuple = ()  # [num_reqs] the round being verified (launch_verify's, in batch order)

        def remember(launch):
            def launch_verify(requests, *args, **kwargs):
                self._requests = tuple(requests)
                return launch(requests, *args, **kwargs)
            return launch_verify

        wrap_method(engine.step_runner, "launch_verify", remember)
        super().install(engine)

    def fires(self, r: int, num_drafts: list[int]) -> bool:
        return r < len(self._requests) and self._requests[r].stats.num_prefix_hit_tokens > 0


class DraftsSilentlyOff(VerifierMutant):
    fault = Fault("drafts-silently-off", "speculation on, yet every round drafts nothing (a proposer never called): "
                  "outputs exact, speed and acceptance gone", "", "stress", Proposer)
    eager_drafting = False

    def install(self, engine) -> None:
        wrap_method(engine.step_runner, "propose", lambda propose: lambda batch, st, timer: None)


CONDITIONAL_MUTANTS = (CorruptAtBatch8, CorruptPastWindow, CorruptOffCapture, CorruptZeroDraftMix, CorruptOnPrefixHit,
                       DraftsSilentlyOff)
