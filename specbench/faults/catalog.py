"""The registry of mutants, in the order selftest runs them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from specbench.errors import SpecbenchError
from specbench.faults.accepted_count import AcceptedCountOffByOne
from specbench.faults.ahead_positions_stale import AheadPositionsStale
from specbench.faults.bonus_residual import BonusResidualKeepsLastDraft
from specbench.faults.bonus_row import BonusFromWrongRow
from specbench.faults.bonus_row_past_end import BonusRowPastEnd
from specbench.faults.bonus_row_unwarped import BonusRowUnwarped
from specbench.faults.catchup_rejected import CatchupSeesRejected
from specbench.faults.chunk_feature_start import ChunkFeatureStartLost
from specbench.faults.chunk_logits_row import ChunkLogitsRowShifted
from specbench.faults.chunk_positions import ChunkPositionsShifted
from specbench.faults.conditional import CONDITIONAL_MUTANTS
from specbench.faults.draft_kv_slice import DraftKvSlice
from specbench.faults.draft_max_seq_len_stale import DraftMaxSeqLenStale
from specbench.faults.draft_positions import DraftPositionsOffByOne
from specbench.faults.draft_probs_unwarped import DraftProbsUnwarped
from specbench.faults.draft_state_kept import DraftStateKeptOnPreemption
from specbench.faults.draft_step_shifted import DraftStepShifted
from specbench.faults.fault import Fault, Mutant
from specbench.faults.feature_rows import FeatureRowsOffByOne
from specbench.faults.fused_head_rope_shift import FusedHeadRopeShift
from specbench.faults.fused_residual_twice import FusedResidualTwice
from specbench.faults.grammar_bonus_unmasked import GrammarBonusUnmasked
from specbench.faults.grammar_marker_in_drafts import GrammarMarkerInDraftsUnmasked
from specbench.faults.grammar_mask_shift import GrammarMaskShifted
from specbench.faults.grammar_not_restored import GrammarNotRestored
from specbench.faults.grammar_rejected_advance import GrammarAdvancedOverRejected
from specbench.faults.grammar_tree_sibling_state import GrammarTreeSiblingState
from specbench.faults.logprobs_row_shift import LogprobsRowShift
from specbench.faults.logprobs_zeroed import LogprobsZeroed
from specbench.faults.gated_attention_gate_shift import GatedAttentionGateShift
from specbench.faults.gated_attention_kv_slot_shift import GatedAttentionKvSlotShift
from specbench.faults.moe_combine_weight_swapped import MoeCombineWeightSwapped
from specbench.faults.moe_padding_mask_frozen import MoePaddingMaskFrozenAtCapture
from specbench.faults.moe_prefill_rows_shifted import MoePrefillRowsShifted
from specbench.faults.moe_route_norm_half_written import MoeRouteNormHalfWritten
from specbench.faults.moe_verify_rows_shared import MoeVerifyRowsShared
from specbench.faults.mtp_hidden_position import MtpHiddenWrongPosition
from specbench.faults.ngram_continuation_late import NgramContinuationLate
from specbench.faults.overlap_stale_input import OverlapStaleInput
from specbench.faults.phase_state_leak import PhaseStateLeak
from specbench.faults.preempt_stale_computed import PreemptStaleComputed
from specbench.faults.prefix_draft_lookahead import PrefixDraftLookahead
from specbench.faults.prefix_cache_off_when_drafting import PrefixCacheOffWhenDrafting
from specbench.faults.prefix_hash_no_parent import PrefixHashNoParent
from specbench.faults.prefix_stale_after_evict import PrefixStaleAfterEvict
from specbench.faults.prefix_uncommitted_block import PrefixUncommittedBlock
from specbench.faults.prompt_logprobs_shift import PromptLogprobsShift
from specbench.faults.rope_store_slot_shift import RopeStoreSlotShift
from specbench.faults.round_graph_stale_features import RoundGraphStaleFeatures
from specbench.faults.sinks_dropped_in_draft import SinksDroppedInDraft
from specbench.faults.slow_step import SlowStep
from specbench.faults.stale_metadata import StaleDraftMetadata
from specbench.faults.state_conv_only_rolled_back import StateConvOnlyRolledBack
from specbench.faults.state_fused_kept_shifted import StateFusedKeptShifted
from specbench.faults.state_graph_slots_stale import StateGraphSlotsStale
from specbench.faults.state_not_rolled_back import StateNotRolledBack
from specbench.faults.state_recurrent_only_rolled_back import StateRecurrentOnlyRolledBack
from specbench.faults.state_rolled_back_too_far import StateRolledBackTooFar
from specbench.faults.state_rolled_back_too_short import StateRolledBackTooShort
from specbench.faults.state_slot_not_reset import StateSlotNotReset
from specbench.faults.state_slot_reused_after_preemption import StateSlotReusedAfterPreemption
from specbench.faults.state_snapshot_wrong_block import StateSnapshotWrongBlock
from specbench.faults.state_stale_in_mixed_batch import StateStaleInMixedBatch
from specbench.faults.state_tree_sibling import StateTreeSibling
from specbench.faults.state_verify_one_token import StateVerifyOneToken
from specbench.faults.state_zero_draft_stale import StateZeroDraftStale
from specbench.faults.tree_bonus_node import TreeBonusWrongNode
from specbench.faults.tree_draft_sibling import TreeDraftSeesSibling
from specbench.faults.tree_kv_not_moved import TreeKvNotMoved
from specbench.faults.tree_mask_sibling import TreeMaskSeesSibling
from specbench.faults.tree_parent_shift import TreeParentOffByOne
from specbench.faults.triton_bonus_neighbour import TritonBonusNeighbour
from specbench.faults.verifier_mutant import VerifierMutant
from specbench.faults.verify_kv import VerifyKvOffByOne
from specbench.faults.verify_stall import VerifyStall
from specbench.faults.window_missing_in_catchup import WindowMissingInCatchup
from specbench.faults.window_missing_in_verify import WindowMissingInVerify
from specbench.faults.window_not_rebuilt import WindowNotRebuiltBetweenDraftSteps
from specbench.faults.window_off_by_one import WindowOffByOne
from specbench.runtime.hooks import NO_HOOKS, PhaseHooks
from specbench.speculation.registry import execution_path

MUTANTS: tuple[type[Mutant], ...] = (
    DraftPositionsOffByOne,
    StaleDraftMetadata,
    DraftKvSlice,
    CatchupSeesRejected,
    PhaseStateLeak,
    VerifyKvOffByOne,
    BonusFromWrongRow,
    BonusRowUnwarped,
    DraftProbsUnwarped,
    BonusRowPastEnd,
    BonusResidualKeepsLastDraft,
    DraftStepShifted,
    DraftMaxSeqLenStale,
    DraftStateKeptOnPreemption,
    FeatureRowsOffByOne,
    MtpHiddenWrongPosition,
    AcceptedCountOffByOne,
    # prefix caching (engine/prefix_reuse.py): caught by the greedy and oracle checks' shared-prefix scenario
    PrefixUncommittedBlock,
    PrefixDraftLookahead,
    PrefixHashNoParent,
    PrefixStaleAfterEvict,
)

# One per fast production path (issue 25), each bending the built engine from outside (path_mutant.py). The selftest
# runs each on the devices where its path is production (selftest_faults); the battery before issue 25 missed most
# of them (docs/path-mutants.md).
PATH_MUTANTS: tuple[type[Mutant], ...] = (
    OverlapStaleInput,
    AheadPositionsStale,
    RoundGraphStaleFeatures,
    FusedResidualTwice,
    RopeStoreSlotShift,
    FusedHeadRopeShift,
    TritonBonusNeighbour,
    NgramContinuationLate,
    PreemptStaleComputed,
)

# Bugs of the sliding-window attention kind: inert on full-attention targets (no window metadata to bend), so the
# selftest runs them on its sliding-window + MoE target only (selftest/tiny_window_moe.py; window_moe_faults);
# tests/faults/test_window_mutants.py shows each passing on a full-attention target and caught on a window target
# (greedy vs HF, INV-KIND), tests/check/test_selftest_window_moe.py caught by the selftest's battery.
WINDOW_MUTANTS: tuple[type[Mutant], ...] = (
    WindowNotRebuiltBetweenDraftSteps,
    WindowOffByOne,
    WindowMissingInVerify,
    WindowMissingInCatchup,
)

# Bugs of attention sinks (gpt-oss): inert on targets without sinks, likewise outside the full-attention selftest;
# tests/faults/test_sink_mutants.py shows the pass on a sink-free pair and the catch on a gpt-oss pair.
SINK_MUTANTS: tuple[type[Mutant], ...] = (SinksDroppedInDraft,)

# Bugs of the MoE layers' fast paths: inert on dense targets (no experts), run on the window + MoE target only. Path
# mutants: run where their path is production (the CUDA graphs: CUDA only). The "grouped" kernel set's (issue 47):
# the prefill one's path is the default "auto" set's, so the CUDA selftest runs it; the two few-token ones bend an
# opt-in path, and tests/kernels/test_kernel_moe_grouped_set.py catches each against the eager reference.
MOE_MUTANTS: tuple[type[Mutant], ...] = (MoePaddingMaskFrozenAtCapture, MoeCombineWeightSwapped, MoeVerifyRowsShared,
                                         MoePrefillRowsShifted, MoeRouteNormHalfWritten)

# Logprobs only (layer "logprobs"): tokens, draft counts and accuracy stay exact, so the selftest's checks (which
# compare tokens and statistics) cannot see them and do not run them; `specbench gate`'s logprobs stage is their
# check (tests/gate/test_gate_logprobs.py runs each through `serve --inject`).
LOGPROBS_MUTANTS: tuple[type[Mutant], ...] = (
    LogprobsRowShift,
    PromptLogprobsShift,
    LogprobsZeroed,
)

# Bugs of tree rounds (eagle_topk > 1): inert on chain rounds, so the selftest runs them on its tree rows only
# (setups.TREE_SHAPE); hosted by every method that drafts trees (DraftsTrees). tests/faults/test_tree_mutants.py
# shows each passing on chain rounds and caught on tree rounds; the draft-side one (a tree draft step's mask) keeps
# greedy output exact: the tree draft oracle catches it (tests/check/test_tree_oracle.py).
TREE_MUTANTS: tuple[type[Mutant], ...] = (
    TreeMaskSeesSibling,
    TreeParentOffByOne,
    TreeKvNotMoved,
    TreeBonusWrongNode,
    TreeDraftSeesSibling,
)

# Bugs of chunked prefill (--enable-chunked-prefill): inert on whole-prompt prefill, so the selftest runs them on its
# chunked rows only (setups.CHUNKED_OPTIONS), whose greedy check compares with the whole-prompt reference;
# tests/faults/test_chunk_mutants.py shows each passing without chunking and caught with it.
CHUNK_MUTANTS: tuple[type[Mutant], ...] = (ChunkPositionsShifted, ChunkLogitsRowShifted, ChunkFeatureStartLost)

# Grammar-constrained decoding only (layer "grammar"): inert on unconstrained requests, so the selftest runs them on
# its constrained rows only (selftest/constrained.py: validity and greedy identity with the plain constrained
# reference), where the grammar extra is installed; tests/engine/test_grammar_mutants.py catches each on the engine
# alone, `specbench gate --stages structured` through `serve --inject`.
GRAMMAR_MUTANTS: tuple[type[Mutant], ...] = (
    GrammarAdvancedOverRejected,
    GrammarMaskShifted,
    GrammarBonusUnmasked,
    GrammarNotRestored,
    GrammarMarkerInDraftsUnmasked,
    GrammarTreeSiblingState,
)

# The grammar mutants whose hooks tree rounds call too (grammar/book.py masked_tree_logits, the rebuild after a
# preemption): the selftest runs them on its constrained tree rows as well as on the chain ones.
# grammar-advanced-over-rejected bends the chain's rollback count, which a tree round never takes (its mask walk ends
# at the committed tokens); grammar-tree-sibling-state bends tree rounds only (a tree fault: needs_tree_shape).
GRAMMAR_TREE_MUTANTS: tuple[type[Mutant], ...] = (
    GrammarMaskShifted,
    GrammarBonusUnmasked,
    GrammarNotRestored,
    GrammarMarkerInDraftsUnmasked,
    GrammarTreeSiblingState,
)

# Speed only (layer "speed"): outputs and statistics exact, the gate's speed stage is the check; slow-step (k = 0
# slowed too) is `specbench ab`'s.
SPEED_MUTANTS: tuple[type[Mutant], ...] = (VerifyStall, SlowStep)

# Only under one condition the gentle gate never creates (layer "stress"): `specbench stress` is their check
# (tests/stress/test_stress_faults.py: each passes the gate and fails the stress stage at its condition; the hybrid
# state one and prefix caching off while drafting, on a served hybrid target: tests/stress/test_stress_hybrid_serve.py).
STRESS_MUTANTS: tuple[type[Mutant], ...] = (*CONDITIONAL_MUTANTS, StateStaleInMixedBatch, PrefixCacheOffWhenDrafting)

# Bugs of a hybrid target's tree verify (recurrent/tree_verify.py): hybrid faults and tree faults both, so the selftest
# runs them on its hybrid target's tree row only (setups.HYBRID_TREE_METHODS); tests/models/test_hybrid_trees.py shows
# each caught by greedy identity with HF transformers and by the state oracle.
HYBRID_TREE_MUTANTS: tuple[type[Mutant], ...] = (StateTreeSibling,)

# Bugs of hybrid targets' recurrent state (rollback, zero-draft rows, slot reuse, prefix-hit snapshots): inert on
# targets without recurrent-state layers (those hooks never run), so the selftest runs them on its hybrid target only
# (selftest/tiny_hybrid.py; hybrid_faults, needs_hybrid_target); tests/faults/test_hybrid_state_mutants.py shows each
# caught by the state oracle (check/state_oracle.py) and by greedy identity with HF transformers (the snapshot one on
# prefix hits: tests/faults/test_state_snapshot_mutant.py), tests/check/test_selftest_paths.py (the hybrid rows of its
# seed-0 selftest run) by the selftest's battery.
HYBRID_MUTANTS: tuple[type[Mutant], ...] = (
    StateNotRolledBack,
    StateRolledBackTooFar,
    StateConvOnlyRolledBack,
    StateZeroDraftStale,
    StateSlotNotReset,
    StateSnapshotWrongBlock,
    StateRolledBackTooShort,
    StateRecurrentOnlyRolledBack,
    StateVerifyOneToken,
    StateSlotReusedAfterPreemption,
) + HYBRID_TREE_MUTANTS

# Bugs of a hybrid target's CUDA graphs (recurrent/graph_rows.py): path mutants of graph.hybrid_decode / _verify, run
# by the selftest on its hybrid target where the path is production (CUDA: hybrid_faults); off CUDA the engine
# captures no graphs. tests/engine/test_hybrid_graph_replays.py catches each with graphs captured by hand (CPU reruns),
# tests/models/test_hybrid_graphs_cuda.py on a GPU.
HYBRID_GRAPH_MUTANTS: tuple[type[Mutant], ...] = (StateGraphSlotsStale,)

# Bugs of a hybrid target's fused kernels (--recurrent-kernels triton, the CUDA default: kernels/gated_delta_verify.py;
# the gated attention's: models/gated_attention_fused.py): path mutants, run by the selftest's hybrid target where
# their path is production (CUDA); tests/recurrent/test_triton_verify_engine.py and
# tests/models/test_gated_attention_fused.py catch each under the CPU interpreter.
HYBRID_KERNEL_MUTANTS: tuple[type[Mutant], ...] = (StateFusedKeptShifted, GatedAttentionKvSlotShift,
                                                   GatedAttentionGateShift)

ALL_MUTANTS = (MUTANTS + PATH_MUTANTS + WINDOW_MUTANTS + MOE_MUTANTS + SINK_MUTANTS + TREE_MUTANTS
               + CHUNK_MUTANTS + LOGPROBS_MUTANTS + GRAMMAR_MUTANTS + SPEED_MUTANTS + STRESS_MUTANTS
               + HYBRID_MUTANTS + HYBRID_GRAPH_MUTANTS + HYBRID_KERNEL_MUTANTS)
FAULTS: dict[str, Fault] = {m.fault.name: m.fault for m in ALL_MUTANTS}
# `--inject` values that mean "no fault" (None too).
NO_FAULT_NAMES = ("", "none")


def selftest_faults(device: str) -> tuple[str, ...]:
    """What `specbench selftest` runs by default on a device class ('cpu' | 'cuda'): every phase-hook mutant, and the
    path mutants whose path is production there (a bug on a path the device never takes cannot show), the tree
    mutants (its tree rows), the chunked-prefill mutants (its chunked rows) and, where the grammar extra is installed,
    the grammar mutants (its constrained rows). Logprobs-only mutants are not run: the selftest compares tokens,
    which they leave exact."""
    from specbench.extras import is_installed

    grammar = GRAMMAR_MUTANTS if is_installed("grammar") else ()
    return tuple(m.fault.name for m in MUTANTS) + tuple(
        m.fault.name for m in PATH_MUTANTS if device in execution_path(m.fault.path).production_on) + tuple(
        m.fault.name for m in TREE_MUTANTS) + tuple(m.fault.name for m in CHUNK_MUTANTS) + tuple(
        m.fault.name for m in grammar)


def window_moe_faults(device: str) -> tuple[str, ...]:
    """What `specbench selftest` runs by default on its sliding-window + MoE target on a device class: every window
    mutant, and the MoE mutants whose path is production there."""
    return tuple(m.fault.name for m in WINDOW_MUTANTS) + tuple(
        m.fault.name for m in MOE_MUTANTS if not m.fault.path or device in execution_path(m.fault.path).production_on)


_WINDOW_MOE_FAULTS = frozenset(m.fault.name for m in WINDOW_MUTANTS + MOE_MUTANTS)
_TREE_FAULTS = frozenset(m.fault.name for m in TREE_MUTANTS + HYBRID_TREE_MUTANTS + (GrammarTreeSiblingState,))
_GRAMMAR_TREE_FAULTS = frozenset(m.fault.name for m in GRAMMAR_TREE_MUTANTS)
_CHUNK_FAULTS = frozenset(m.fault.name for m in CHUNK_MUTANTS)
_HYBRID_FAULTS = frozenset(m.fault.name for m in HYBRID_MUTANTS + HYBRID_GRAPH_MUTANTS + HYBRID_KERNEL_MUTANTS)


def hybrid_faults(device: str) -> tuple[str, ...]:
    """What `specbench selftest` runs by default on its hybrid target: every hybrid-state mutant (phase hooks of the
    engine's state commit and prefill, on every device), and the hybrid graph mutants where their path is
    production (CUDA)."""
    return tuple(m.fault.name for m in HYBRID_MUTANTS) + tuple(
        m.fault.name for m in HYBRID_GRAPH_MUTANTS + HYBRID_KERNEL_MUTANTS
        if device in execution_path(m.fault.path).production_on)


def needs_hybrid_target(name: str) -> bool:
    """Whether a fault acts only on a hybrid target's recurrent state (the selftest runs it on that target alone)."""
    return name in _HYBRID_FAULTS


_GRAMMAR_FAULTS = frozenset(m.fault.name for m in GRAMMAR_MUTANTS)


def needs_tree_shape(name: str) -> bool:
    """Whether a fault acts only on tree rounds (the selftest runs it on its tree rows alone)."""
    return name in _TREE_FAULTS


def runs_on_tree_rows(name: str) -> bool:
    """Whether the selftest runs a fault on its tree rows: the tree faults, and the grammar faults that tree rounds
    host too (on the constrained tree rows: GRAMMAR_TREE_MUTANTS)."""
    return name in _TREE_FAULTS or name in _GRAMMAR_TREE_FAULTS


def needs_chunked_prefill(name: str) -> bool:
    """Whether a fault acts only on chunked prefill (the selftest runs it on its chunked rows alone)."""
    return name in _CHUNK_FAULTS


def needs_constrained_decoding(name: str) -> bool:
    """Whether a fault acts only on grammar-constrained requests (the selftest runs it on its constrained rows
    alone)."""
    return name in _GRAMMAR_FAULTS


def needs_window_moe_target(name: str) -> bool:
    """Whether a fault acts only on a sliding-window or MoE target (the selftest runs it on that target alone)."""
    return name in _WINDOW_MOE_FAULTS


_MUTANT_OF: dict[str, type[Mutant]] = {m.fault.name: m for m in ALL_MUTANTS}


def resolve_fault(name: str | None) -> Fault | None:
    if name is None or name in NO_FAULT_NAMES:
        return None
    try:
        return FAULTS[name]
    except KeyError:
        raise SpecbenchError(f"unknown fault {name!r}; supported: {', '.join(sorted(FAULTS))}") from None


def fault_names() -> list[str]:
    return list(FAULTS)


def build_hooks(inject: str | None) -> PhaseHooks:
    """A fresh mutant for one engine (its state is that engine's), or the identity hooks."""
    fault = resolve_fault(inject)
    return NO_HOOKS if fault is None else _MUTANT_OF[fault.name]()


def wrap_verifier(inject: str | None, verify_fn: Callable) -> Callable:
    """The verify function an engine with fault `inject` runs (the rows check tests it without an engine)."""
    mutant = build_hooks(inject)
    return mutant.wrap_verifier(verify_fn) if isinstance(mutant, VerifierMutant) else verify_fn


def check_hosted(inject: str | None, method: str) -> None:
    """A fault runs only on a method whose proposer (or speculative round) calls its hook."""
    fault = resolve_fault(inject)
    if fault is not None and method not in fault.methods:
        raise SpecbenchError(
            f"fault {fault.name!r} has no hook in method {method!r}; it applies to: {', '.join(fault.methods)}"
        )


@dataclass(frozen=True)
class Injection:
    """A catalog fault as the `EngineFault` an engine's builder applies (specbench.runtime.hooks)."""

    fault: Fault

    @property
    def name(self) -> str:
        return self.fault.name

    def new_hooks(self, method: str) -> PhaseHooks:
        check_hosted(self.fault.name, method)
        return _MUTANT_OF[self.fault.name]()


def injection(name: str | None) -> Injection | None:
    """`--inject NAME` as what create_engine applies; None (or an off spelling) for the production engine; an
    unknown name fails listing the faults."""
    fault = resolve_fault(name)
    return None if fault is None else Injection(fault)
