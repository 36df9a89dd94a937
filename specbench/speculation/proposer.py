"""The proposer plug point: one Protocol for n-gram, draft-LM and EAGLE drafters.

Per decode round the engine calls `propose` once (after scheduling reserved KV
for the newest token plus the drafts), then verifies, then reports the number
of accepted drafts through `on_verified`. A proposer that keeps its own KV
shares the target's block tables: draft KV for position p lives in the same
slot as target KV for p, in the proposer's own tensors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch

from specbench.kv.kv_cache import KVCache, KVCacheSpec
from specbench.speculation.sampling import SamplingTensors

if TYPE_CHECKING:
    from specbench.runtime.cuda_graph import GraphPlan
    from specbench.speculation.draft_records import DraftRecorder


@dataclass(frozen=True, slots=True)
class ProposeInput:
    request_ids: tuple[str, ...]  # [num_reqs]
    token_ids: tuple[tuple[int, ...], ...]  # [num_reqs][num_tokens_r] committed tokens incl. the newest
    num_draft_tokens: tuple[int, ...]  # [num_reqs] drafts wanted (0 allowed)
    block_tables: tuple[tuple[int, ...], ...]  # [num_reqs][num_blocks_r], cover newest + drafts
    sampling: SamplingTensors  # the requests' sampling settings (drafts must use the same warping)


@dataclass(frozen=True, slots=True)
class DraftProposal:
    draft_token_ids: torch.Tensor  # [num_reqs, max_num_draft] int64, padded with -1
    num_draft_tokens: tuple[int, ...]  # [num_reqs] may be fewer than asked (n-gram finds no match)
    draft_probs: torch.Tensor | None  # [num_reqs, max_num_draft, vocab] or None for deterministic drafts
    # [num_reqs, max_num_draft] int64 request-local parent of each draft, -1 = the root (the newest committed
    # token), padded with -1; None = a chain (parent i - 1). Set only by tree rounds (speculation/tree_propose.py).
    parents: torch.Tensor | None = None


class Proposer(Protocol):
    name: str
    # Which target hidden states the proposer consumes: () = none, (-1,) = final
    # normed hidden state, else HF `hidden_states` indices (EAGLE-3 aux layers).
    target_feature_layers: tuple[int, ...]

    def kv_cache_spec(self) -> KVCacheSpec | None:
        """Spec of the proposer's own paged KV (same block ids as the target), or None."""

    def bind_kv_cache(self, kv_cache: KVCache | None) -> None: ...

    def propose(self, inp: ProposeInput) -> DraftProposal: ...

    def on_verified(self, request_ids: tuple[str, ...], num_accepted: tuple[int, ...]) -> None:
        """Accepted drafts per request of the round just verified."""

    def free(self, request_id: str) -> None:
        """Forget a finished or preempted request."""

    def describe(self) -> dict[str, object]:
        """JSON-serialisable facts for the run manifest (checkpoint dialect, resolved layers, ...)."""

    # Optional capabilities: proposers subclass Proposer, so one without them inherits these no-ops.
    drafts_ahead: bool = False  # propose_ahead can give drafts (the engine reserves KV for it only then)

    def enable_cuda_graphs(self, plan: GraphPlan) -> None:
        """Capture draft-phase graphs for every batch bucket of `plan` (no-op: the proposer drafts eagerly)."""

    def add_target_features(self, request_id: str, start: int, features: torch.Tensor) -> None:
        """Target features [n, feature_dim] of positions [start, start + n), handed over as the target produces
        them (only when target_feature_layers is non-empty); the proposer owns them until free()."""

    def prepare_cuda_graphs(self, num_steps: int) -> None:
        """Capture what k = num_steps needs before a timed region (no-op unless graphs are enabled)."""

    def propose_ahead(self, request_ids: tuple[str, ...], newest_positions: tuple[int, ...],
                      block_tables: tuple[tuple[int, ...], ...], verify_token_ids: torch.Tensor,
                      num_accepted: torch.Tensor, target_features: torch.Tensor | None) -> torch.Tensor | None:
        """The next round's drafts [num_reqs, k], built on the device from a verify the host has not read yet
        (overlapped rounds), or None: this proposer (or this round) drafts only from host-read results."""
        return None

    def confirm_ahead(self, inp: ProposeInput, verify_features: torch.Tensor, num_accepted: tuple[int, ...],
                      rows_of_request: tuple[int, ...]) -> None:
        """The host read the verify a round was proposed ahead from (only after propose_ahead gave drafts);
        `inp` covers the requests still there, `rows_of_request` their rows in that verify."""

    def pause_step_graphs(self, is_paused: bool) -> None:
        """While paused, draft-decode steps run eagerly; their captured graphs are kept for afterwards (no-op: the
        proposer has none)."""

    def attach_recorder(self, recorder: DraftRecorder | None) -> None:
        """Record every draft step's logits into `recorder` from now on (the draft oracle); None stops recording.
        No-op: the proposer has no draft model to check, so nothing is recorded."""
