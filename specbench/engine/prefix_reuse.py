"""Automatic prefix caching, the engine's side: which cached blocks a request admitted reuses, and which of a
running request's blocks are registered once full of committed KV (kv/prefix_cache.py holds the index, the block
manager the refcounts).

Rules, each for a reason:
- Only full blocks below the request's committed KV are registered: the target's (num_cached_tokens: the newest
  token's KV is not written yet) and, while it drafts, the drafter's own (it writes draft KV into the same block ids:
  ResumesFromCachedKV.num_final_draft_kv). Nothing ever writes below those, so a registered block is read-only.
- A hit never covers the block holding the request's last token (at most floor((num_tokens - 1) / block_size)
  blocks): the prefill must compute that token's logits, and it would write into that block (vLLM #44151).
- While drafting, a block's key also covers the tokens after it that its draft KV read (EAGLE/MTP: the next block's
  first token, ResumesFromCachedKV.draft_kv_lookahead): two requests that share a block but not the token after it
  hold different draft KV there. A drafter that cannot resume from cached KV at all gets no hits while drafting.
- A request asking for prompt logprobs looks nothing up: cached positions would have no logits (as vLLM does).
- The hash's extra key names the drafter whose KV the blocks hold ("target" when none is written: no drafter, or
  k = 0), so blocks cached under one never serve the other.
- Hybrid targets (recurrent-state layers): a block's K/V is not the state after it, so a hit must end at a block whose
  state snapshot is stored (recurrent/state_snapshots.py): it is shortened to the last such block (or to none), and
  the request's slot is restored from that snapshot before its prefill continues. A block's snapshot is published
  when the block is registered (its last token committed then).
"""

from __future__ import annotations

from specbench.engine.logprobs import is_prompt_logprobs_due
from specbench.engine.request import Request
from specbench.execution_paths import PathRecorder
from specbench.kv.block_hash import extend_block_hashes
from specbench.kv.block_manager import BlockManager
from specbench.kv.prefix_cache import PrefixCache
from specbench.recurrent.state_cache import StateCache
from specbench.recurrent.state_snapshots import StateSnapshots
from specbench.runtime.hooks import NO_HOOKS, PhaseHooks
from specbench.speculation.capabilities import HasDraftKV, Proposer, ResumesFromCachedKV


def prefix_caching_off_reason(proposer: Proposer | None, kv_windows: tuple[int, ...],
                              is_hybrid: bool = False, num_state_snapshots: int = 0) -> str | None:
    """Why an engine cannot cache prefixes safely, or None: the one place that decides it."""
    if is_hybrid and num_state_snapshots == 0:
        # A cached block holds K/V, not the recurrent state after it: without snapshots a hit could not resume the
        # Gated DeltaNet layers.
        return ("the target has recurrent-state (Gated DeltaNet) layers and --state-snapshots is 0: cached blocks "
                "hold no state to resume them from")
    if kv_windows:
        return ("every layer is windowed: leading blocks are released as a request runs, so its table has holes no "
                "later request can share")
    if isinstance(proposer, HasDraftKV) and not isinstance(proposer, ResumesFromCachedKV):
        return f"the {proposer.name} drafter's KV cannot resume from cached blocks"
    return None


def new_prefix_cache(hooks: PhaseHooks, paths: PathRecorder, snapshots: StateSnapshots | None = None) -> PrefixCache:
    """`snapshots`: a hybrid target's state snapshots, dropped with their blocks."""
    def drops_evicted_hash(block_hash: bytes) -> bool:
        paths.record("prefix.evict")
        drops = hooks.drops_evicted_hash(block_hash)
        if drops and snapshots is not None:
            snapshots.drop(block_hash)
        return drops

    return PrefixCache(drops_evicted_hash)


class PrefixReuse:
    def __init__(self, block_manager: BlockManager, drafter: ResumesFromCachedKV | None, paths: PathRecorder,
                 hooks: PhaseHooks = NO_HOOKS, states: StateCache | None = None) -> None:
        if block_manager.prefix_cache is None:
            raise ValueError("PrefixReuse needs a block manager with a prefix cache")
        self.block_manager = block_manager
        self.cache = block_manager.prefix_cache
        self.block_size = block_manager.block_size
        self.drafter = drafter  # None: no draft KV in the blocks (no proposer, or n-gram)
        self.paths = paths
        self.hooks = hooks
        # a hybrid target's slots, their snapshots attached (hits resume from them); None: no recurrent state
        self.states = states
        self.snapshots = None if states is None else states.snapshots
        if states is not None and self.snapshots is None:
            raise ValueError("PrefixReuse on a hybrid target needs its state snapshots")
        self.num_queried_tokens = 0  # since construction: tokens of admitted requests' prefills (looked up or not)
        self.num_hit_tokens = 0  # of those, served from the cache

    def _drafts(self, num_steps: int) -> bool:
        """Whether the blocks hold draft KV this run keeps valid (a drafter with KV, k > 0)."""
        return self.drafter is not None and num_steps > 0

    def extra_key(self, num_steps: int) -> bytes:
        return b"draft:" + self.drafter.name.encode() if self._drafts(num_steps) else b"target"

    def _lookahead(self, num_steps: int) -> int | None:
        """Tokens past a block its key covers; None: no hit can resume the drafter."""
        if not self._drafts(num_steps):
            return 0
        lookahead = self.drafter.draft_kv_lookahead
        return None if lookahead is None else self.hooks.draft_kv_lookahead(lookahead)

    def lookup(self, request: Request, num_steps: int) -> list[int]:
        """The cached blocks `request` may start with (possibly none); nothing is taken yet."""
        lookahead = self._lookahead(num_steps)
        if lookahead is None or is_prompt_logprobs_due(request):
            return []
        n, bs = request.num_tokens, self.block_size
        hashes = self._hashes(request, (n - lookahead) // bs, num_steps, lookahead)
        blocks = self.cache.lookup(hashes)[: (n - 1) // bs]
        while self.snapshots is not None and blocks and not self.snapshots.has(hashes[len(blocks) - 1]):
            blocks.pop()  # never the KV of a hit without the state after it
        return blocks

    def admit(self, request: Request, blocks: list[int], num_steps: int) -> None:
        """Start `request` (new or preempted, its table empty) on the cached `blocks`: the prefill runs from there."""
        self.block_manager.share(request.block_table, blocks)
        num_hit = len(blocks) * self.block_size
        request.num_cached_tokens = num_hit
        request.num_registered_blocks = len(blocks)
        self.num_queried_tokens += request.num_tokens
        self.num_hit_tokens += num_hit
        request.stats.num_prefix_hit_tokens += num_hit
        if request.stats.num_cached_prompt_tokens is None:  # the first admission's: a resumed request's KV is its own
            request.stats.num_cached_prompt_tokens = num_hit
        if num_hit:
            self.paths.record("prefix.hit")
            if self.snapshots is not None:
                self._restore_state(request, len(blocks))
            if self._drafts(num_steps):
                self.drafter.resume_at(request.request_id, num_hit)

    def _restore_state(self, request: Request, num_blocks: int) -> None:
        """The request's slot takes the snapshot of its hit's last block (lookup kept only hits ending at one)."""
        hashes = request.block_hashes[:num_blocks]
        source = self.hooks.state_snapshot_block([self.snapshots.has(h) for h in hashes])
        self.snapshots.restore(hashes[source], self.states.conv, self.states.recurrent,
                               self.states.slot_for(request.request_id))
        self.paths.record("hybrid.snapshot_restore")

    def register(self, request: Request, num_steps: int) -> None:
        """Register the request's blocks that became full of committed KV since the last call (a duplicate of a
        cached block stays private)."""
        lookahead = self._lookahead(num_steps) or 0
        num_final = min(request.num_cached_tokens, request.num_tokens)
        if self._drafts(num_steps):
            num_final = min(num_final, self.drafter.num_final_draft_kv(request.request_id))
        num_final = self.hooks.cacheable_tokens(request.request_id, num_final, request.num_tokens)
        num_full = min(num_final // self.block_size, len(request.block_table),
                       (request.num_tokens - lookahead) // self.block_size)
        if num_full <= request.num_registered_blocks:
            return
        hashes = self._hashes(request, num_full, num_steps, lookahead)
        for b in range(request.num_registered_blocks, num_full):
            if self.cache.register(request.block_table[b], hashes[b]):
                self.paths.record("prefix.register")
            # the state after the block's last token, if taken: only a committed position's is ever published
            num_covered = (b + 1) * self.block_size
            if (self.snapshots is not None and num_covered <= request.num_cached_tokens
                    and self.snapshots.publish(request.request_id, num_covered, hashes[b])):
                self.paths.record("hybrid.snapshot_take")
        request.num_registered_blocks = num_full

    def _hashes(self, request: Request, num_blocks: int, num_steps: int, lookahead: int) -> list[bytes]:
        """The request's chained block hashes of its first `num_blocks` full blocks (extended as it grows)."""
        key = self.extra_key(num_steps)
        if request.block_hashes_key != key:  # k went to or from 0 between runs: other content
            request.block_hashes, request.block_hashes_key = [], key
        extend_block_hashes(request.block_hashes, request.token_ids, num_blocks, self.block_size, key,
                            self.hooks.block_hash_parent, lookahead)
        return request.block_hashes
