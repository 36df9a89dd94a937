"""Continuous batching: admit waiting requests up to `max_concurrency`, decode the rest.

Each step is either a prefill step (new or preempted requests, whole prompt)
or a decode step (every running request). A decode step reserves KV for the
newest token plus `num_steps` drafts; when the pool runs out the most recently
admitted request is preempted (its blocks freed, recomputed later).

With chunked prefill on (schedule_mixed), a step instead carries every running request's decode/verify tokens and
then prompt chunks of partially prefilled and waiting requests within `max_num_batched_tokens`.

When every layer of every model writing into the block tables is windowed (`kv_windows`), a running request's
leading blocks that no future query sees in any layer are released before each step is scheduled
(attention/window.py: num_blocks_outside_windows), so a long generation holds about its window's blocks.

With prefix caching (`prefix`, engine/prefix_reuse.py) a request admitted starts on the cached blocks of its longest
cached prefix and prefills only the rest (the token budget counts only those); each running request's blocks are
registered as they fill with committed KV, before each step is scheduled and when its table is freed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from specbench.attention.window import num_blocks_outside_windows
from specbench.engine.prefill_chunk import PrefillChunk
from specbench.engine.prefix_reuse import PrefixReuse
from specbench.engine.request import Request, RequestStatus
from specbench.kv.block_manager import BlockManager
from specbench.runtime.hooks import NO_HOOKS, PhaseHooks
from specbench.speculation.draft_shape import CHAIN
from specbench.speculation.tree.plan import kv_rows, tree_plan


@dataclass(frozen=True, slots=True)
class ScheduledBatch:
    is_prefill: bool
    requests: tuple[Request, ...]
    # [num_reqs] drafts to propose and verify per request (decode steps only; 0 for prefill); a tree round's
    # KV positions after the newest token (Scheduler.num_round_positions), its node count set by its plan
    num_draft_tokens: tuple[int, ...]
    preempted: tuple[Request, ...]
    # Prompt chunks run in the same forward after the requests' decode/verify rows (chunked prefill); () for every
    # step without chunking. The chunks' requests are not in `requests`.
    chunks: tuple[PrefillChunk, ...] = ()
    # prefill steps with prefix caching: tokens of the admitted requests' prefills, and of those the cache served
    num_prefix_queried_tokens: int = 0
    num_prefix_hit_tokens: int = 0


class Scheduler:
    hooks: PhaseHooks = NO_HOOKS  # the test harness's seam (runtime/hooks.py); the builder hands over the engine's

    def __init__(
        self,
        block_manager: BlockManager,
        *,
        max_concurrency: int,
        max_num_batched_tokens: int,
        num_steps: int,
        max_model_len: int,
        kv_windows: tuple[int, ...] = (),
        enable_chunked_prefill: bool = False,
        prefix: PrefixReuse | None = None,
    ) -> None:
        self.block_manager = block_manager
        self.prefix = prefix  # None: prefix caching off
        # [num_layers] every layer's window when each layer of each model sharing the tables is windowed; ():
        # some layer attends to the whole context, so no block is ever released early.
        self.kv_windows = kv_windows
        self.max_concurrency = max_concurrency
        self.max_num_batched_tokens = max_num_batched_tokens
        self.num_steps = num_steps
        self.draft_shape = CHAIN  # tree shape of the rounds (LLMEngine.set_draft_shape)
        self.max_model_len = max_model_len
        self.enable_chunked_prefill = enable_chunked_prefill
        self._chunks_turn = False  # tree rounds and chunk steps alternate (schedule_mixed)
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []

    def add(self, request: Request) -> None:
        self.waiting.append(request)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def next_arrival(self) -> float | None:
        return min((r.arrival_time for r in self.waiting), default=None)

    def schedule(self, now: float) -> ScheduledBatch | None:
        self._release_outside_windows()
        self._register_committed()
        if self.enable_chunked_prefill:
            return self.schedule_mixed(now)
        batch = self._schedule_prefill(now)
        if batch is None and self.running:
            batch = self._schedule_decode()
        if batch is not None:
            self._check_writes_private(batch.requests)
        return batch

    def _schedule_prefill(self, now: float) -> ScheduledBatch | None:
        admitted: list[Request] = []
        num_tokens = 0
        # Blocks the admitted requests will need for their first decode round, beyond their prompt.
        num_reserved = 0
        bm = self.block_manager
        queried, hit = (self.prefix.num_queried_tokens, self.prefix.num_hit_tokens) if self.prefix else (0, 0)
        for request in list(self.waiting):
            if len(self.running) + len(admitted) >= self.max_concurrency:
                break
            if request.arrival_time > now:
                continue
            # A preempted request recomputes all tokens it has, output included, but the cached prefix.
            n = request.num_tokens
            cached = self.prefix.lookup(request, self.num_steps) if self.prefix else []
            num_new = n - len(cached) * bm.block_size
            if admitted and num_tokens + num_new > self.max_num_batched_tokens:
                break
            # Keep room for every admitted request's first decode round so admission never
            # forces an immediate preemption (parked cached blocks it takes count as free ones).
            first_round = n + 1 + self.num_round_positions
            num_needed = bm.num_blocks_for(first_round) - len(cached) + bm.num_parked(cached)
            if num_needed + num_reserved > bm.num_free_blocks:
                break
            if self.prefix is not None:
                self.prefix.admit(request, cached, self.num_steps)
            bm.grow(request.block_table, n)
            num_reserved += bm.num_missing_blocks(request.block_table, first_round)
            self.waiting.remove(request)
            request.status = RequestStatus.RUNNING
            admitted.append(request)
            num_tokens += num_new
        if not admitted:
            return None
        self.running.extend(admitted)
        if self.prefix is not None:
            queried, hit = self.prefix.num_queried_tokens - queried, self.prefix.num_hit_tokens - hit
        return ScheduledBatch(True, tuple(admitted), tuple(0 for _ in admitted), (), num_prefix_queried_tokens=queried,
                              num_prefix_hit_tokens=hit)

    def _schedule_decode(self) -> ScheduledBatch:
        scheduled, num_drafts, preempted = self._grow_rounds(list(self.running), [])
        return ScheduledBatch(False, tuple(scheduled), tuple(num_drafts), tuple(preempted))

    def _grow_rounds(self, decoding: list[Request],
                     victims_first: list[Request]) -> tuple[list[Request], list[int], list[Request]]:
        """(requests that got their round's KV, their drafts, the preempted): each of `decoding` in order grows its
        table for the newest token and its drafts (what the verify forward writes); when the pool runs out, the last
        of `victims_first` is preempted, else the last decoding request still waiting, else the request itself."""
        scheduled: list[Request] = []
        num_drafts: list[int] = []
        preempted: list[Request] = []
        while decoding:
            request = decoding.pop(0)
            num_draft = self._num_drafts_for(request)
            while not self.block_manager.grow(request.block_table, request.num_cached_tokens + 1 + num_draft):
                victim = victims_first.pop() if victims_first else decoding.pop() if decoding else request
                self._preempt(victim)
                preempted.append(victim)
                if victim is request:
                    break
            else:
                scheduled.append(request)
                num_drafts.append(num_draft)
        return scheduled, num_drafts, preempted

    # ---- chunked prefill --------------------------------------------------------------------
    def schedule_mixed(self, now: float) -> ScheduledBatch | None:
        """One step's batch under chunked prefill: every decoding request's decode/verify tokens first (each with its
        drafts), then prompt chunks filling what is left of `max_num_batched_tokens`: partially prefilled requests
        first, in admission order, then waiting ones as they are admitted. A prompt longer than the budget is split
        over steps. None when nothing can run.

        Decode/verify tokens are never cut by the budget (a request mid-generation always advances). A request is
        admitted only when its whole prefill and first round fit the pool: its blocks are grown for the whole
        prefill then, so its later chunks never wait for KV (and never deadlock against each other).

        Tree rounds (eagle_topk > 1) are not mixed with chunks: a tree verify's mask and layout stay their own
        forward; tree rounds and chunk-only steps alternate while chunks are pending."""
        decoding, num_drafts, preempted = self._schedule_running_rounds()
        rounds = ScheduledBatch(False, tuple(decoding), tuple(num_drafts), tuple(preempted))
        queried, hit = (self.prefix.num_queried_tokens, self.prefix.num_hit_tokens) if self.prefix else (0, 0)
        if self.draft_shape.is_tree and self.num_steps > 0 and decoding:
            chunks = self._schedule_chunks(now, self.max_num_batched_tokens) if self._chunks_turn else []
            self._chunks_turn = not self._chunks_turn
            return self._mixed((), (), preempted, chunks, queried, hit) if chunks else rounds
        chunks = self._schedule_chunks(now, self.max_num_batched_tokens - sum(1 + n for n in num_drafts))
        if not decoding and not chunks:
            return rounds if preempted else None
        return self._mixed(decoding, num_drafts, preempted, chunks, queried, hit)

    def _mixed(self, decoding, num_drafts, preempted, chunks, queried: int, hit: int) -> ScheduledBatch:
        """The mixed step's batch, with the prefix-cache tokens its admissions queried and hit (counters before
        the admissions: `queried`, `hit`); its writes checked private (never into a shared cached block)."""
        if self.prefix is not None:
            queried, hit = self.prefix.num_queried_tokens - queried, self.prefix.num_hit_tokens - hit
        self._check_writes_private(tuple(decoding) + tuple(c.request for c in chunks))
        return ScheduledBatch(False, tuple(decoding), tuple(num_drafts), tuple(preempted), tuple(chunks),
                              num_prefix_queried_tokens=queried, num_prefix_hit_tokens=hit)

    def _schedule_running_rounds(self) -> tuple[list[Request], list[int], list[Request]]:
        """_grow_rounds over the requests past their prefill, preempting partially prefilled requests first (newest
        first), then decoding ones from the back."""
        return self._grow_rounds([r for r in self.running if not r.is_prefilling],
                                 [r for r in self.running if r.is_prefilling])

    def _schedule_chunks(self, now: float, budget: int) -> list[PrefillChunk]:
        """Chunks within `budget` tokens: partially prefilled requests first, then waiting ones admitted."""
        chunks: list[PrefillChunk] = []
        for request in self.running:
            if budget <= 0:
                return chunks
            if request.is_prefilling:
                chunk = PrefillChunk(request, request.num_cached_tokens,
                                     min(budget, request.num_prefill_tokens - request.num_cached_tokens))
                chunks.append(chunk)
                budget -= chunk.num_tokens
        bm = self.block_manager
        num_reserved = 0  # blocks the admitted requests will need for their first round, beyond their prefill
        for request in list(self.waiting):
            if budget <= 0 or len(self.running) >= self.max_concurrency:
                break
            if request.arrival_time > now:
                continue
            n = request.num_tokens  # a preempted request recomputes its output too, but its cached prefix
            cached = self.prefix.lookup(request, self.num_steps) if self.prefix else []
            first_round = n + 1 + self.num_round_positions
            # parked cached blocks it takes count as free ones until taken
            num_needed = bm.num_blocks_for(first_round) - len(cached) + bm.num_parked(cached)
            if num_needed + num_reserved > bm.num_free_blocks:
                break
            if self.prefix is not None:
                self.prefix.admit(request, cached, self.num_steps)  # num_cached_tokens: the hit's length
            bm.grow(request.block_table, n)
            num_reserved += bm.num_missing_blocks(request.block_table, first_round)
            self.waiting.remove(request)
            request.status = RequestStatus.RUNNING
            request.num_prefill_tokens = n
            self.running.append(request)
            # From num_cached_tokens: a prefix-cache hit's length, or 0 (a hit must leave at least the last prompt
            # token to run: its row samples the first token).
            chunk = PrefillChunk(request, request.num_cached_tokens, min(budget, n - request.num_cached_tokens))
            chunks.append(chunk)
            budget -= chunk.num_tokens
        return chunks

    def schedule_lookahead(self) -> ScheduledBatch | None:
        """Plain decode of every running request, scheduled before the previous step's tokens reach the host
        (overlapped decoding): each request's KV already counts the token in flight. None when that would need a
        preemption: a lookahead step frees nothing, so the synchronous path decides who is preempted."""
        self._release_outside_windows()
        self._register_committed()
        requests = tuple(self.running)
        if not self.reserve(requests, [r.num_cached_tokens + 1 for r in requests]):
            return None
        self._check_writes_private(requests)
        return ScheduledBatch(False, requests, (0,) * len(requests), ())

    def reserve(self, requests: tuple[Request, ...], num_positions: list[int]) -> bool:
        """Grow each request's table to cover `num_positions[i]` positions, all or nothing, never preempting
        (a round drafted ahead writes KV before the host knows how far its requests advanced)."""
        bm = self.block_manager
        num_missing = sum(bm.num_missing_blocks(r.block_table, n) for r, n in zip(requests, num_positions))
        if num_missing > bm.num_free_blocks:
            return False
        for request, n in zip(requests, num_positions):
            bm.grow(request.block_table, n)
        return True

    def schedule_reserved(self, requests: tuple[Request, ...], num_steps: int) -> ScheduledBatch:
        """The verify of a round drafted ahead: its KV was reserved when the round was drafted."""
        for request in requests:
            if not self.block_manager.grow(request.block_table, request.num_cached_tokens + 1 + num_steps):
                raise RuntimeError(f"{request.request_id}: KV reserved for a round drafted ahead is missing")
        return ScheduledBatch(False, requests, (num_steps,) * len(requests), ())

    @property
    def num_round_positions(self) -> int:
        """KV positions a decode round writes after the newest token: k for a chain, a tree's nodes or its
        drafter's tree rows, whichever reach further (speculation/tree/plan.py)."""
        if self.draft_shape.is_tree and self.num_steps > 0:
            return kv_rows(tree_plan(self.draft_shape, self.num_steps))
        return self.num_steps

    def _release_outside_windows(self) -> None:
        """Release each running request's leading blocks that no future query sees in any layer. Every query still
        to run sits at a position >= num_cached_tokens - 1 (a plain step in flight writes position
        num_cached_tokens - 1, overlap.py; a verify or decode queries from num_cached_tokens on)."""
        if not self.kv_windows:
            return
        bm = self.block_manager
        for request in self.running:
            if request.num_cached_tokens < 1:
                continue
            releasable = num_blocks_outside_windows(request.num_cached_tokens - 1, self.kv_windows, bm.block_size)
            request.num_released_blocks = bm.release_leading(request.block_table, request.num_released_blocks,
                                                             releasable)

    def _register_committed(self) -> None:
        """Register every running request's blocks that filled with committed KV since it was last scheduled."""
        if self.prefix is not None:
            for request in self.running:
                self.prefix.register(request, self.num_steps)

    def _check_writes_private(self, requests) -> None:
        """A step writes each request's KV from num_cached_tokens on: never into a block the prefix cache shares."""
        bm = self.block_manager
        if self.prefix is None:
            return
        for request in requests:
            b = request.num_cached_tokens // bm.block_size
            if b < len(request.block_table) and bm.is_shared(request.block_table[b]):
                raise RuntimeError(f"{request.request_id}: a step would write position {request.num_cached_tokens} "
                                   f"into shared block {request.block_table[b]} (prefix cache)")

    def _free(self, request: Request) -> None:
        """Free the request's blocks, registering first what its committed KV filled (a multi-turn follow-up or a
        preempted request's recompute may reuse them)."""
        if self.prefix is not None:
            self.prefix.register(request, self.num_steps)
        self.block_manager.free(request.block_table, request.num_released_blocks)
        request.num_released_blocks = 0
        request.num_registered_blocks = 0

    def _num_drafts_for(self, request: Request) -> int:
        # Never draft past the model's context (accepted + bonus must fit). Near max_tokens every request still
        # drafts k, as serving engines do, and the commit truncates: uniform rounds keep CUDA graphs in use
        # (a batch always has requests in their last rounds), and acceptance counts what the verifier accepted.
        room = self.max_model_len - request.num_tokens - 1
        if self.draft_shape.is_tree:  # the KV the round writes; its depth is cut to the room (engine/tree_round.py)
            return self.num_round_positions if room > 0 else 0
        return max(0, min(self.num_steps, room))

    def _preempt(self, request: Request) -> None:
        self.hooks.preempting(request)
        self.running.remove(request)
        self._free(request)
        request.num_cached_tokens = 0
        request.status = RequestStatus.WAITING
        request.stats.num_preemptions += 1
        self.waiting.appendleft(request)

    def preempt_all(self) -> tuple[Request, ...]:
        """Every running request back to waiting, its KV freed (a step failed: each recomputes what it has)."""
        preempted = tuple(reversed(self.running))  # appendleft: the waiting queue keeps their running order
        for request in preempted:
            # the failed step may have left KV it counted unwritten: register nothing more of this table
            request.num_registered_blocks = len(request.block_table)
            self._preempt(request)
        return preempted

    def abort(self, request: Request) -> None:
        """Drop a waiting or running request and free its KV blocks (its client went away)."""
        if request in self.waiting:
            self.waiting.remove(request)
        else:
            self.running.remove(request)
        self._free(request)
        request.pending_features = None
        request.status = RequestStatus.FINISHED
        request.finish_reason = "abort"

    def finish(self, request: Request, reason: str) -> None:
        self.running.remove(request)
        self._free(request)
        request.status = RequestStatus.FINISHED
        request.finish_reason = reason
