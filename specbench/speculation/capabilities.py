"""The speculator plug point: a small core interface every proposer implements, and capability interfaces a
proposer class declares by inheriting them.

Per decode round the engine calls `propose` once (after scheduling reserved KV for the newest token plus the
drafts), then verifies, then reports the number of accepted drafts through `on_verified`. Everything else a drafter
may do is a capability: the engine and the builder call a capability's methods only after asking
`isinstance(proposer, Capability)`; the test machinery, check and selftest ask the registry which methods' classes
have it (`speculation/registry.py`, `methods_with`), never a list of method names. A capability has no default
implementation: a class that declares one implements all of its methods (the ABC refuses to instantiate it
otherwise), and a class without it is never asked.

A proposer that keeps its own KV (`HasDraftKV`) shares the target's block tables: draft KV for position p lives in
the same slot as target KV for p, in the proposer's own tensors.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

import torch

from specbench.execution_paths import ExecutionPath
from specbench.kv.kv_cache import KVCache, KVCacheSpec
from specbench.speculation.proposer import DraftProposal, ProposeInput

if TYPE_CHECKING:
    from specbench.runtime.cuda_graph import GraphPlan
    from specbench.speculation.draft_records import DraftRecorder
    from specbench.speculation.tree.plan import TreePlan


class Proposer(ABC):
    """The core every speculative method implements: draft, learn what was accepted, forget, describe."""

    name: str  # the method it runs as (EngineConfig.method); a class serving several sets it per instance
    # The execution paths (execution_paths.py) this class's own code decides to take, `methods` left (): the registry
    # lists them for the methods whose class is this one or a subclass (it reads each class's own declaration, so a
    # subclass does not repeat its base's). Every method also records proposer.<method>, declared by the registry.
    execution_paths: ClassVar[tuple[ExecutionPath, ...]] = ()

    @abstractmethod
    def propose(self, inp: ProposeInput) -> DraftProposal: ...

    @abstractmethod
    def on_verified(self, request_ids: tuple[str, ...], num_accepted: tuple[int, ...]) -> None:
        """Accepted drafts per request of the round just verified."""

    @abstractmethod
    def free(self, request_id: str) -> None:
        """Forget a finished or preempted request."""

    @abstractmethod
    def describe(self) -> dict[str, object]:
        """JSON-serialisable facts for the run manifest (checkpoint dialect, resolved layers, ...)."""


class HasDraftKV(Proposer):
    """Keeps its own paged draft KV, in the target's block ids (the builder sizes the pool for both)."""

    @abstractmethod
    def kv_cache_spec(self) -> KVCacheSpec:
        """Spec of the proposer's own paged KV (same block ids as the target)."""

    @abstractmethod
    def bind_kv_cache(self, kv_cache: KVCache) -> None:
        """The draft KV the builder allocated from kv_cache_spec(), before the first propose."""


class ResumesFromCachedKV(HasDraftKV):
    """Its draft KV in a block the prefix cache shares (kv/prefix_cache.py) serves any request whose tokens match the
    block's and the `draft_kv_lookahead` tokens after it, so a request admitted with a cache hit resumes drafting
    there. A class with draft KV that does not declare this turns prefix caching off for its engines
    (engine/prefix_reuse.py says why)."""

    # Tokens past a position that its draft KV there was computed from: 0 for a draft LM (KV at p reads tokens <= p);
    # 1 for EAGLE / MTP (KV at p from the target's feature at p and the token at p + 1), so a block's cache key also
    # covers the next block's first token. None: a hit cannot resume it at all (state outside the KV).
    draft_kv_lookahead: ClassVar[int | None]

    @abstractmethod
    def num_final_draft_kv(self, request_id: str) -> int:
        """n: the request's draft KV at positions [0, n) is written from committed tokens and never rewritten (0 for
        a request it does not know): the engine registers a block only below this and the target's committed KV."""

    @abstractmethod
    def resume_at(self, request_id: str, num_cached_tokens: int) -> None:
        """The request starts (or restarts after preemption) with a prefix hit: its draft KV at positions
        [0, num_cached_tokens) is in its blocks; drafting catches up from there (target features, if it consumes
        them, are handed over from num_cached_tokens on)."""


class ConsumesTargetFeatures(Proposer):
    """Drafts from the target's hidden states, which the engine hands over as the target produces them."""

    # Which target hidden states: (-1,) = final normed hidden state, else HF `hidden_states` indices (EAGLE-3 aux
    # layers). Never empty: a proposer that needs none does not declare this capability.
    target_feature_layers: tuple[int, ...]

    @abstractmethod
    def add_target_features(self, request_id: str, start: int, features: torch.Tensor) -> None:
        """Target features [n, feature_dim] of positions [start, start + n); the proposer owns them until free()."""


class DraftsAhead(Proposer):
    """Can draft the next round on the device from a verify the host has not read yet (overlapped rounds); the
    engine reserves KV for the round ahead only for such a proposer."""

    @abstractmethod
    def propose_ahead(self, request_ids: tuple[str, ...], newest_positions: tuple[int, ...],
                      block_tables: tuple[tuple[int, ...], ...], verify_token_ids: torch.Tensor,
                      num_accepted: torch.Tensor, target_features: torch.Tensor | None) -> torch.Tensor | None:
        """The next round's drafts [num_reqs, k], or None: this round drafts only from host-read results."""

    @abstractmethod
    def confirm_ahead(self, inp: ProposeInput, verify_features: torch.Tensor, num_accepted: tuple[int, ...],
                      rows_of_request: tuple[int, ...]) -> None:
        """The host read the verify a round was proposed ahead from (only after propose_ahead gave drafts);
        `inp` covers the requests still there, `rows_of_request` their rows in that verify."""


class CapturesDraftGraphs(Proposer):
    """Runs its draft phase from CUDA graphs once the builder enables them (CUDA only)."""

    @abstractmethod
    def enable_cuda_graphs(self, plan: GraphPlan) -> None:
        """Capture draft-phase graphs for every batch bucket of `plan`."""

    @abstractmethod
    def prepare_cuda_graphs(self, num_steps: int) -> None:
        """Capture what k = num_steps needs before a timed region (nothing until graphs are enabled)."""

    @abstractmethod
    def pause_step_graphs(self, is_paused: bool) -> None:
        """While paused, draft-decode steps run eagerly; their captured graphs are kept for afterwards."""


class RecordsDraftLogits(Proposer):
    """Drafts with a model whose every draft step's logits the draft oracle (check/oracle.py) can record."""

    @abstractmethod
    def attach_recorder(self, recorder: DraftRecorder | None) -> None:
        """Record every draft step's logits into `recorder` from now on; None stops recording."""


class DraftsTrees(Proposer):
    """Drafts a tree of candidates per request (eagle_topk > 1), not only a chain: top-k children of the best frontier
    nodes per draft step, cut to a node budget (speculation/tree/builder.py, tree/propose.py, tree/device.py). Tree
    rounds run synchronously (engine/tree_round.py); their draft steps on the device, from CUDA graphs where the
    class also declares CapturesTreeDraftGraphs."""

    @abstractmethod
    def propose_tree(self, inp: ProposeInput, plan: TreePlan) -> DraftProposal:
        """One tree per request of `inp` (every request drafts), shaped by `plan`: the proposal's `parents` is set,
        its `draft_probs` None (the children are the deterministic top-k of the draft distribution)."""

    @abstractmethod
    def on_tree_verified(self, request_ids: tuple[str, ...], accepted_nodes: tuple[tuple[int, ...], ...]) -> None:
        """The accepted path of each request's tree (request-local node indices, root to leaf) of the round just
        verified; the target KV of that path is already compacted to its positions (on_verified is not called)."""


class CapturesTreeDraftGraphs(Proposer):
    """Runs a tree round's draft steps (DraftsTrees) from CUDA graphs, one per batch bucket and TreePlan, once the
    builder enabled CUDA graphs (CapturesDraftGraphs.enable_cuda_graphs); other rounds draft their trees eagerly."""

    @abstractmethod
    def prepare_tree_draft_graphs(self, plan: TreePlan) -> None:
        """Capture the tree draft of `plan` before a timed region (a no-op until graphs are enabled)."""
