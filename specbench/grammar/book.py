"""The one owner of every request's grammar state (keyed by request id, like a proposer's draft state).

A step's masks walk each constrained request's drafts through its state (row i: the state after drafts 0..i-1); the
walk stays advanced until the step is read back, when `settle` rolls back the drafts the verifier rejected and
advances over the bonus token. A tree round's masks (`masked_tree_logits`) walk each branch depth first: node i's row
gets the state after the path from the root to node i (its ancestors' tokens and its own), so siblings never see
each other's tokens; the walk ends back at the committed tokens, and `settle` advances over the accepted path and
the bonus. A state is freed with its request (finished, aborted, preempted) and rebuilt from the
request's committed output tokens when it is next scheduled, so preemption and prefix-cache hits restore it.
"""

from __future__ import annotations

import time

import torch

from specbench.grammar.bitmask import apply_token_bitmask, num_words
from specbench.grammar.library import GrammarLibrary
from specbench.grammar.state import GrammarState
from specbench.grammar.hooks import GrammarHooks


class GrammarBook:
    def __init__(self, tokenizer, vocab_size: int, eos_token_ids: frozenset[int], hooks: GrammarHooks,
                 paths=None) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.eos_token_ids = eos_token_ids
        self.hooks = hooks  # the engine's PhaseHooks (identity unless a mutant is injected)
        self.paths = paths  # the engine's PathRecorder (execution_paths.py), or None
        self._library: GrammarLibrary | None = None  # built at the first constrained request (~1 s for 100k vocabs)
        self.states: dict[str, GrammarState] = {}
        self.num_walked: dict[str, int] = {}  # request id -> drafts its last mask walk advanced over, until settle
        # Drafts of a constrained request are cut at the first token its grammar refuses before the verify
        # (drafting under the mask: no verify rows are spent on drafts bound to be rejected).
        self.is_drafting_masked = True
        self.mask_seconds = 0.0  # host time spent walking states and filling masks (BENCHMARKS.md's mask share)
        self.num_mask_rows = 0
        self.draft_mask_seconds = 0.0  # host time the drafting walks took (draft_mask.py, tree_draft_mask.py)

    @staticmethod
    def is_constrained(requests) -> bool:
        return any(r.sampling_params.grammar is not None for r in requests)

    @property
    def library(self) -> GrammarLibrary:
        if self._library is None:
            self._library = GrammarLibrary(self.tokenizer, self.vocab_size, self.eos_token_ids)
        return self._library

    def state_for(self, request) -> GrammarState:
        """The request's state at its committed tokens (rebuilt from them after a preemption)."""
        state = self.states.get(request.request_id)
        if state is None:
            spec = request.sampling_params.grammar
            library = self.library
            marker = library.marker_token_ids(spec.starts_after) if spec.starts_after else ()
            state = GrammarState(library.matcher(spec), marker, self.eos_token_ids, library.llg.torch)
            for token in self.hooks.grammar_replay(request.request_id, tuple(request.output_token_ids)):
                if not state.consume(token):
                    state.is_broken = True
                    break
            self.states[request.request_id] = state
            if request.output_token_ids:
                self._record("grammar.rebuild")
        return state

    def free(self, request_id: str) -> None:
        self.states.pop(request_id, None)
        self.num_walked.pop(request_id, None)

    # ---- drafting under the mask --------------------------------------------------------------
    def cut_drafts(self, requests, draft_rows: list[list[int]]) -> list[int]:
        """[num_reqs] how many leading drafts of each request its grammar allows (unconstrained: all)."""
        cut = []
        for request, drafts in zip(requests, draft_rows):
            if request.sampling_params.grammar is None or not self.is_drafting_masked:
                cut.append(len(drafts))
                continue
            state = self.state_for(request)
            num_valid = 0
            for token in drafts:
                if not state.consume(token):
                    break
                num_valid += 1
            state.rollback(num_valid)
            cut.append(num_valid)
        return cut

    # ---- masks of a step ------------------------------------------------------------------------
    def masked_logits(self, logits: torch.Tensor, requests, draft_rows: list[list[int]]) -> torch.Tensor:
        """logits [sum(1 + num_drafts), vocab] (request r's rows: after its newest token, then after each draft)
        masked by each constrained request's grammar; unchanged when none is constrained."""
        if not self.is_constrained(requests):
            return logits
        start = time.perf_counter()
        bitmask = self.hooks.grammar_mask_rows([1 + len(d) for d in draft_rows], self._bitmask(requests, draft_rows))
        self.mask_seconds += time.perf_counter() - start
        self.num_mask_rows += bitmask.shape[0]
        self._record("grammar.mask")
        masked = apply_token_bitmask(logits, bitmask)
        return self.hooks.grammar_bonus_logits(masked, logits, [1 + len(d) for d in draft_rows])

    def _bitmask(self, requests, draft_rows: list[list[int]]) -> torch.Tensor:
        """[num_rows, ceil(vocab / 32)] int32; walks each constrained request's state over its drafts (left there)."""
        num_rows = sum(1 + len(d) for d in draft_rows)
        bitmask = torch.full((num_rows, num_words(self.vocab_size)), -1, dtype=torch.int32)
        row = 0
        for request, drafts in zip(requests, draft_rows):
            if request.sampling_params.grammar is None:
                row += 1 + len(drafts)
                continue
            state = self.state_for(request)
            is_open_before = state.gate.is_open
            num_walked = 0
            for i in range(len(drafts) + 1):
                if i > num_walked:  # draft i - 1 was refused: the verifier rejects it, no later row emits a token
                    break
                is_past_drafted_marker = is_open_before and not state.gate.is_open
                if not is_past_drafted_marker or self.hooks.grammar_masks_after_drafted_marker():
                    state.fill_mask(bitmask, row + i)
                if i < len(drafts) and state.consume(drafts[i]):
                    num_walked += 1
                    if is_open_before and not state.gate.is_open:
                        self._record("grammar.reasoning_end_in_drafts")
            self.num_walked[request.request_id] = num_walked
            row += 1 + len(drafts)
        return bitmask

    # ---- masks of a tree round ------------------------------------------------------------------
    def masked_tree_logits(self, logits: torch.Tensor, requests, tokens: list[list[int]],
                           parents: list[list[int]]) -> torch.Tensor:
        """logits [sum(1 + num_nodes), vocab] of a tree verify (request r's rows: its root, then node i at 1 + i)
        masked by each constrained request's grammar; tokens / parents [num_reqs][num_nodes_r] the drafted tree on
        the host (parent -1: a child of the root; parents precede children). Unchanged when none is constrained."""
        if not self.is_constrained(requests):
            return logits
        start = time.perf_counter()
        num_rows = [1 + len(t) for t in tokens]
        bitmask = torch.full((sum(num_rows), num_words(self.vocab_size)), -1, dtype=torch.int32)
        row = 0
        for request, request_tokens, request_parents in zip(requests, tokens, parents):
            if request.sampling_params.grammar is not None:
                self._walk_tree(request, request_tokens, request_parents, bitmask, row)
                self.num_walked[request.request_id] = 0  # the walk ends at the committed tokens
            row += 1 + len(request_tokens)
        bitmask = self.hooks.grammar_tree_mask_rows(parents, self.hooks.grammar_mask_rows(num_rows, bitmask))
        self.mask_seconds += time.perf_counter() - start
        self.num_mask_rows += bitmask.shape[0]
        self._record("grammar.tree_mask")
        masked = apply_token_bitmask(logits, bitmask)
        return self.hooks.grammar_bonus_logits(masked, logits, num_rows)

    def _walk_tree(self, request, tokens: list[int], parents: list[int], bitmask: torch.Tensor, first_row: int
                   ) -> None:
        """Fill the request's rows first_row (the root) and first_row + 1 + i (node i) depth first, one consume and
        one rollback per node. A node whose token its path's grammar refuses is never accepted (its parent's row
        masks it), so its row and its subtree's stay all-allowed, as a chain's rows after a refused draft."""
        state = self.state_for(request)
        is_open_before = state.gate.is_open
        children: list[list[int]] = [[] for _ in range(len(tokens) + 1)]  # [1 + num_nodes]: 0 = the root
        for node, parent in enumerate(parents):
            children[parent + 1].append(node)

        def visit(slot: int) -> None:  # the state is at the path to `slot` (0: the root, 1 + i: node i)
            is_past_drafted_marker = is_open_before and not state.gate.is_open
            if not is_past_drafted_marker or self.hooks.grammar_masks_after_drafted_marker():
                state.fill_mask(bitmask, first_row + slot)
            for node in children[slot]:
                if state.consume(tokens[node]):
                    if is_open_before and not state.gate.is_open and not is_past_drafted_marker:
                        self._record("grammar.reasoning_end_in_drafts")
                    visit(1 + node)
                    state.rollback(1)

        visit(0)

    # ---- read back ------------------------------------------------------------------------------
    def settle(self, requests, num_accepted: list[int], committed: list[list[int]]) -> None:
        """After a step is read back: each constrained request's state follows exactly its committed tokens (the
        accepted drafts and the bonus): the rejected drafts' advance is rolled back, the bonus consumed."""
        for request, accepted, tokens in zip(requests, num_accepted, committed):
            if request.sampling_params.grammar is None:
                continue
            state = self.state_for(request)
            num_walked = self.num_walked.pop(request.request_id, 0)
            state.rollback(min(self.hooks.grammar_rollback(request.request_id, num_walked, accepted), num_walked))
            # Accepted drafts past the walk (only a mutant's masks accept them) and the bonus token.
            for token in tokens[min(accepted, num_walked):]:
                if not state.consume(token):
                    if not state.is_broken:
                        self._record("grammar.violation")
                    state.is_broken = True
                    break

    def _record(self, path: str) -> None:
        if self.paths is not None:
            self.paths.record(path)
