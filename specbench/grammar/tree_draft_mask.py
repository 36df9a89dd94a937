"""Drafting a tree under the mask: the drafter's log-probs at each frontier node masked by the grammar state after
that node's path from the root, so the top-k children it keeps are tokens the verifier can accept (the tree verify
masks its rows the same way: grammar/book.py masked_tree_logits). One host read per draft step (the frontier), so it
is taken only for batches with a constrained request, on the eager tree draft (no tree graph replays it)."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from specbench.grammar.bitmask import apply_token_bitmask, num_words


class TreeDraftMask:
    """One tree round's drafting walk: handed to the proposer in ProposeInput.draft_mask; every state is back at its
    committed tokens after each call (each path is consumed, its mask filled, and rolled back)."""

    def __init__(self, book, requests) -> None:
        self.book = book
        self.states = {r: book.state_for(request) for r, request in enumerate(requests)
                       if request.sampling_params.grammar is not None}  # batch row -> its request's state
        # per batch row, builder node (creation index) -> its path's target ids from the root; None: refused
        self._paths: list[dict[int, tuple[int, ...] | None]] = [{} for _ in requests]

    def root(self, log_probs: torch.Tensor, to_target: Callable[[torch.Tensor], torch.Tensor] | None = None
             ) -> torch.Tensor:
        """log_probs [num_reqs, vocab] after each request's newest committed token, masked."""
        return self._masked(log_probs[:, None], [[()] for _ in range(log_probs.shape[0])], to_target)[:, 0]

    def step(self, frontier, log_probs: torch.Tensor,
             to_target: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
        """log_probs [num_reqs, num_frontier, vocab] at each frontier node (tree/builder.py Frontier: token ids in
        the drafter's vocabulary, `to_target` maps them; None: the target's), masked by the state after its path."""
        num_reqs, num_frontier = frontier.token_ids.shape
        token_ids = frontier.token_ids if to_target is None else to_target(frontier.token_ids.reshape(-1))
        tokens = token_ids.reshape(num_reqs, num_frontier).tolist()
        nodes, parents = frontier.node_index.tolist(), frontier.parent.tolist()
        paths = []
        for r in range(num_reqs):
            row = []
            for f in range(num_frontier):
                parent_path = () if parents[r][f] < 0 else self._paths[r].get(parents[r][f])
                path = None if parent_path is None else (*parent_path, tokens[r][f])
                self._paths[r][nodes[r][f]] = path
                row.append(path)
            paths.append(row)
        return self._masked(log_probs, paths, to_target)

    def _masked(self, log_probs: torch.Tensor, paths: list[list[tuple[int, ...] | None]],
                to_target: Callable[[torch.Tensor], torch.Tensor] | None) -> torch.Tensor:
        start = time.perf_counter()
        try:
            return self._masked_walk(log_probs, paths, to_target)
        finally:
            self.book.draft_mask_seconds += time.perf_counter() - start

    def _masked_walk(self, log_probs: torch.Tensor, paths: list[list[tuple[int, ...] | None]],
                     to_target: Callable[[torch.Tensor], torch.Tensor] | None) -> torch.Tensor:
        num_reqs, num_nodes, draft_vocab = log_probs.shape
        vocab_size = self.book.vocab_size
        bitmask = torch.full((num_reqs * num_nodes, num_words(vocab_size)), -1, dtype=torch.int32)
        for r, state in self.states.items():
            for f, path in enumerate(paths[r]):
                if path is None:  # a refused ancestor: never accepted, drafted freely
                    continue
                num_consumed = 0
                for token in path:
                    if not state.consume(token):
                        break
                    num_consumed += 1
                if num_consumed == len(path):
                    state.fill_mask(bitmask, r * num_nodes + f)
                else:
                    self._refuse(r, path)
                state.rollback(num_consumed)
        flat = log_probs.reshape(num_reqs * num_nodes, draft_vocab)
        if to_target is None and draft_vocab == vocab_size:
            return apply_token_bitmask(flat, bitmask).view_as(log_probs)
        # a drafter vocabulary other than the target's: a draft id is allowed where its target id is
        is_allowed = apply_token_bitmask(torch.zeros(flat.shape[0], vocab_size, device=flat.device), bitmask).isfinite()
        ids = torch.arange(draft_vocab, device=flat.device)
        target_ids = ids if to_target is None else to_target(ids)
        is_in_vocab = target_ids < vocab_size
        is_draft_allowed = is_allowed[:, target_ids.clamp_max(vocab_size - 1)] & is_in_vocab
        return flat.masked_fill(~is_draft_allowed, float("-inf")).view_as(log_probs)

    def _refuse(self, r: int, path: tuple[int, ...]) -> None:
        for node, known in self._paths[r].items():
            if known == path:
                self._paths[r][node] = None
