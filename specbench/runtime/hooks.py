"""The seam where a test harness may bend the inputs the engine and proposers build; identity by default.

Proposers and the engine call these at fixed points of each phase and use what comes back. A clean engine
holds `NO_HOOKS`; `specbench.faults` subclasses `PhaseHooks` (one class per mutant, owning its own state).
Every method runs on the host where inputs are built, never inside a kernel or a captured graph.

Production code never names a fault: whoever builds an engine may hand `specbench.llm.create_engine` an
`EngineFault` (test machinery builds one: specbench.faults.injection), which gives that engine its hooks and
bends it once built (`PhaseHooks.install`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the seam stays importable without torch
    import torch

    from specbench.attention.metadata import AttentionMetadata


@dataclass(frozen=True)
class StepPlan:
    """What draft-decode step j queries and sees, per request still drafting."""

    positions: list[int]  # [num_reqs_in_step] query position
    seq_lens: list[int]  # [num_reqs_in_step] visible keys
    slot_mapping: list[int] | None  # [num_reqs_in_step] KV slot written; None = each position's own slot


class PhaseHooks:
    # True: the proposer drafts phase by phase (no whole-round graph), so every draft hook below runs.
    eager_drafting: bool = False

    # ---- the engine is built ------------------------------------------------------------------
    def install(self, engine: object) -> None:
        """Called once on the built engine (an LLMEngine: the engine sits above this seam), before its first
        request: a mutant may wrap methods of the engine's own objects here (its verify function, proposer, fast
        paths, statistics). Clean hooks: nothing."""

    # ---- draft-extend (catch-up) -------------------------------------------------------------
    def extend_seq_lens(self, request_ids: tuple[str, ...], seq_lens: list[int],
                        block_tables: list[tuple[int, ...]], block_size: int) -> list[int]:
        """Visible keys of each request's catch-up ([num_reqs_in_extend])."""
        return seq_lens

    def extend_metadata(self, md: AttentionMetadata) -> AttentionMetadata:
        return md

    def extend_hidden(self, request_ids: tuple[str, ...], hidden: torch.Tensor,
                      last_rows: torch.Tensor) -> torch.Tensor:
        """EAGLE: the catch-up's input hidden [num_tokens, H]; last_rows [num_reqs_in_extend] each request's last."""
        return hidden

    # ---- draft-decode steps -----------------------------------------------------------------
    def step_plan(self, step: int, plan: StepPlan, block_tables: list[tuple[int, ...]], block_size: int) -> StepPlan:
        return plan

    def step_metadata(self, step: int, request_ids: tuple[str, ...], md: AttentionMetadata,
                      hidden: torch.Tensor | None) -> AttentionMetadata:
        """Step j's metadata; hidden [num_reqs_in_step, H] is what the step is fed (EAGLE), None for a draft LM."""
        return md

    def draft_probs(self, logits: torch.Tensor, probs: torch.Tensor | None) -> torch.Tensor | None:
        """Draft LM: the draft law it hands the verifier for the rows it just drafted: probs [n, target_vocab] warped
        as the tokens were drawn (temperature, top-k, top-p) from logits [n, draft_vocab]; None when every request is
        greedy."""
        return probs

    # ---- the draft LM's drafting state ------------------------------------------------------------
    def draft_kv_written(self, request_id: str, end: int) -> None:
        """Draft LM, on_verified: the request's last round wrote its draft KV up to position `end` (exclusive),
        rejected drafts included, before the proposer trims its bookkeeping to the accepted ones."""

    def keeps_draft_state(self, request_id: str) -> bool:
        """Draft LM, free: whether the proposer keeps the request's drafting state (its draft-KV bookkeeping) although
        the request finished or was preempted (clean hooks: never)."""
        return False

    # ---- prefix caching (engine/prefix_reuse.py) --------------------------------------------------
    def cacheable_tokens(self, request_id: str, num_final: int, num_tokens: int) -> int:
        """How many leading positions of the request the engine may register in the prefix cache: `num_final`, those
        whose target (and, while drafting, draft) KV is committed; never the newest token's, not written yet."""
        return num_final

    def draft_kv_lookahead(self, lookahead: int) -> int:
        """Tokens past a block that its cache key covers while drafting: the drafter's (ResumesFromCachedKV)."""
        return lookahead

    def block_hash_parent(self, parent: bytes) -> bytes:
        """The parent hash a block's hash chains over (kv/block_hash.py): its predecessor's."""
        return parent

    def drops_evicted_hash(self, block_hash: bytes) -> bool:
        """Whether the prefix cache forgets an evicted block's hash (always: its block is handed out afresh)."""
        return True

    # ---- target -----------------------------------------------------------------------------
    def verify_slot_mapping(self, block_tables: list[list[int]], positions: list[int], num_query: list[int],
                            block_size: int) -> list[int] | None:
        """Verify KV slots ([num_tokens]) of a speculative round; None = each position's own slot."""
        return None

    # ---- chunked prefill (engine/chunk_inputs.py, engine/mixed_step.py) ----------------------------------------
    def chunk_positions(self, request_id: str, start: int, num_tokens: int) -> list[int]:
        """Positions ([num_tokens]) a prompt chunk's tokens [start, start + num_tokens) are fed at; its KV slots and
        visible keys follow them."""
        return list(range(start, start + num_tokens))

    def chunk_logits_row(self, request_id: str, last_row: int) -> int:
        """The forward row whose logits sample a final chunk's first token (its last prompt row)."""
        return last_row

    def chunk_feature_start(self, request_id: str, start: int) -> int:
        """The position a chunk's target features are handed to the proposer at (add_target_features)."""
        return start

    # ---- recurrent state of hybrid targets (recurrent/state_cache.py) ------------------------------------
    def state_slots(self, request_ids: tuple[str, ...], slots: list[int]) -> list[int]:
        """The state slot ([num_reqs]) each request of a forward reads and writes: the one the cache holds for it
        (StateCache.slot_for; a preempted request gave its slot back and is handed one afresh)."""
        return slots

    def state_starts_fresh(self, is_first_position: list[bool]) -> list[bool]:
        """Which requests of a forward ([num_reqs]) start their recurrent state from zeros: those whose rows start at
        position 0 (a prefill, or the re-prefill of a preempted request whose slot another request may have held)."""
        return is_first_position

    def state_commit_requests(self, num_draft_tokens: list[int]) -> list[bool]:
        """Which verify requests ([num_verify_reqs]) the verifier's commit writes a state slot for: every one, those
        that drafted nothing included (their newest token still moved the state)."""
        return [True] * len(num_draft_tokens)

    def state_commit_rows(self, part: str, num_accepted: torch.Tensor, num_draft_tokens: torch.Tensor) -> torch.Tensor:
        """Which kept position ([num_committed] device int64; 0 = after the newest token) each committed request's
        `part` ("conv" | "recurrent") state slot takes: the one after its last accepted draft (a tree round: its
        accepted path's last node's row, 1 + its node index)."""
        return num_accepted

    def state_tree_parents(self, parent_rows: torch.Tensor) -> torch.Tensor:
        """A tree verify's rows ([num_rows] device int64, each request's root then its nodes): the kept row whose
        state each row's recurrent layers continue (recurrent/tree_verify.py): its parent's; -1 for a root (its
        request's slot)."""
        return parent_rows

    def state_snapshot_block(self, has_snapshot: list[bool]) -> int:
        """Which block of a prefix hit ([num_hit_blocks] whether each has a state snapshot; the last one has) the
        request's recurrent state resumes from (recurrent/state_snapshots.py): the last, whose end the prefill
        continues from."""
        return len(has_snapshot) - 1

    def logprob_rows(self, num_draft_tokens: list[int]) -> list[int] | None:
        """Verify rows ([sum(1 + num_draft_tokens)]) whose distribution gives each emitted token's logprob, in the
        verify's row order; None = each token's own row (row j of a request predicts its output token j)."""
        return None

    def plain_decode_launch(self, requests: tuple[object, ...],
                            newest_token_ids: torch.Tensor | None) -> torch.Tensor | None:
        """As a plain decode step is launched (engine/step_loop.py): the tokens it is fed, [num_reqs] on the device
        (the step in flight's own output; None: a synchronous launch, fed from the host). `requests` are the
        engine's, their computed-token counts as the step reads them (a hook may bend those too)."""
        return newest_token_ids

    def preempting(self, request: object) -> None:
        """The scheduler is about to preempt `request` (the engine's): its KV freed, its computed tokens reset."""

    # ---- grammar-constrained decoding (grammar/book.py) -----------------------------------------------
    def grammar_mask_rows(self, num_rows_per_request: list[int], bitmask: torch.Tensor) -> torch.Tensor:
        """A step's token bitmask [sum(num_rows_per_request), ceil(vocab / 32)] int32, request r's rows in order: row
        i masked by the grammar state after the request's drafts before i."""
        return bitmask

    def grammar_tree_mask_rows(self, parents: list[list[int]], bitmask: torch.Tensor) -> torch.Tensor:
        """A tree round's token bitmask [sum(1 + num_nodes_r), ceil(vocab / 32)] int32 (request r's root row, then
        node i's at 1 + i, masked by the grammar state after the path to node i); parents [num_reqs][num_nodes_r]
        (-1: a child of the root)."""
        return bitmask

    def grammar_bonus_logits(self, masked: torch.Tensor, raw: torch.Tensor,
                             num_rows_per_request: list[int]) -> torch.Tensor:
        """The logits [num_rows, vocab] the verifier reads: the grammar-masked ones (`raw`: unmasked; request r's
        rows in order, its last one sampling its bonus token)."""
        return masked

    def grammar_rollback(self, request_id: str, num_walked: int, num_accepted: int) -> int:
        """At read-back: how many of the drafts the masks' walk advanced the request's grammar over are undone
        (every one the verifier rejected)."""
        return num_walked - num_accepted

    def grammar_replay(self, request_id: str, token_ids: tuple[int, ...]) -> tuple[int, ...]:
        """The committed output tokens a rebuilt grammar state (after a preemption) is advanced over: all of them."""
        return token_ids

    def grammar_masks_after_drafted_marker(self) -> bool:
        """Whether rows past a reasoning end marker ("</think>") inside the drafts are masked by the grammar."""
        return True

    def committed_logprobs(self, token_logprobs: list | None) -> list | None:
        """What one request reports for the tokens one step commits to it ([num_tokens] of the engine's
        TokenLogprob; None when it asked for none)."""
        return token_logprobs


NO_HOOKS = PhaseHooks()
# The hooks production calls on its fast paths (overlapped plain decoding, preemption): the only ones a path mutant
# (specbench.faults.path_mutant) may override, since they leave drafting as production runs it.
PATH_HOOKS = frozenset({"plain_decode_launch", "preempting"})


class EngineFault(Protocol):
    """A fault its caller applies to an engine it builds (`specbench.llm.create_engine(config, fault)`)."""

    @property
    def name(self) -> str:
        """What a run records: the engine is a mutant (a manifest's `fault_injected`)."""

    def new_hooks(self, method: str) -> PhaseHooks:
        """Fresh hooks for one engine of `method` (their state is that engine's); raises SpecbenchError when the
        method's proposer calls none of the fault's hooks."""



def mutant_label(inject: str | None) -> str:
    """Marker every table of a mutant run carries (`inject`: the fault's name; None: a real run)."""
    return f"MUTANT[{inject}]" if inject else ""
