"""The conditions the stress stage drives a server into, each with why it is there, built from what is known of the
server (its block size, windows, chunk size, CUDA-graph capture sizes, context): the matrix."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

CACHE_STATES = ("cold", "warm", "restart")  # in order of how far from the gentle gate (cold: what it creates)


@dataclass(frozen=True, slots=True)
class ServerShape:
    """What the matrix is sized from; None = unknown (its conditions are listed as not run, with why)."""

    block_size: int  # KV block (page) size in tokens
    window: int | None  # the smallest sliding window of the target or drafter, in tokens
    chunk_size: int | None  # tokens a step may carry (chunked prefill's budget)
    capture_sizes: tuple[int, ...]  # batch sizes with CUDA graphs (ascending)
    max_concurrency: int  # requests the server runs at once
    max_prompt_tokens: int  # the longest prompt to try (below the context, leaving room for the answer)
    can_restart: bool  # the stage can restart the server (--server-cmd, or the embedded engine)
    is_hybrid: bool = False  # the target carries recurrent state (Gated DeltaNet): its conditions say why (HYBRID)


@dataclass(frozen=True, slots=True)
class Condition:
    name: str
    why: str  # one line: the bug class it is there for
    concurrency: int  # requests in flight
    prompt_tokens: int  # each request's prompt length
    num_requests: int
    cache: str = "cold"  # CACHE_STATES: cold = fresh prompts; warm = the condition's prompts sent a second time
    # (judged on the second pass) over one shared prefix; restart = the server restarted between the passes
    shared_prefix: bool = False  # every request's filler is the same (a long system prompt)
    zero_draft_mix: bool = False  # half the requests ask what drafts nothing (fresh numbers), half what drafts a lot
    # (text to copy), in the same batches
    multi_turn: bool = False  # (cache "warm") the second pass is the next turn: each request's first prompt and its
    # own answer, then a new question; judged on that turn (a hit on blocks its speculative rounds committed)

    @property
    def size(self) -> tuple[int, int, int, int, int]:
        """How far from the gentle gate: smaller in every factor = gentler (the report's smallest failing one)."""
        return (self.concurrency, self.prompt_tokens, CACHE_STATES.index(self.cache), int(self.multi_turn),
                int(self.zero_draft_mix))

    def describe(self) -> str:
        parts = [f"concurrency {self.concurrency}", f"prompts of {self.prompt_tokens} tokens"]
        if self.multi_turn:
            parts.append("second turn over the first answer")
        elif self.cache != "cold":
            parts.append({"warm": "prefix cache warm", "restart": "after a restart"}[self.cache])
        if self.shared_prefix and self.cache == "cold":
            parts.append("one shared prefix")
        if self.zero_draft_mix:
            parts.append("zero-draft requests mixed in")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class NotRun:
    name: str
    why: str  # why it could not run here (what would make it run)


SHORT = 96  # tokens: the gentle prompt (a canary question, up to ~50 tokens, and a little filler)


def _off_capture(shape: ServerShape) -> int | None:
    """A batch size between captured ones (padded to the next graph: the rows past the batch are garbage)."""
    sizes = [s for s in shape.capture_sizes if s <= shape.max_concurrency]
    for low, high in zip(sizes, sizes[1:]):
        if high - low > 1 and low >= 2:
            return low + 1 + (high - low - 1) // 2
    return None


def default_matrix(shape: ServerShape, *, num_requests: int = 8) -> tuple[tuple[Condition, ...], tuple[NotRun, ...]]:
    """Conditions (gentlest first) and those that cannot run on what is known of the server."""
    n = num_requests
    b = shape.block_size
    conditions = [
        Condition("gentle", "what the gate already creates: one request at a time, short prompts", 1, SHORT, n),
        Condition("concurrency-8", "batched verify: rows of other requests (SGLang #35150: 111/304 wrong at 8, "
                  "0/100 serial)", 8, SHORT, max(n, 16)),
    ]
    skipped = []
    off = _off_capture(shape)
    if off is not None:
        conditions.append(Condition(f"batch-{off}-off-capture", "a batch size between CUDA-graph capture sizes "
                                    "(padded rows; vLLM #50065)", off, SHORT, max(n, 2 * off)))
    else:
        skipped.append(NotRun("batch-off-capture", "no gap between the capture sizes below the server's concurrency"))
    if shape.max_concurrency > 8:
        c = shape.max_concurrency
        conditions.append(Condition(f"saturating-{c}", "every slot busy, preemption and admission under pressure", c,
                                    SHORT, 2 * c))
    m = max(2, -(-(SHORT + 32) // b))  # past every question's own length
    for delta in (-1, 0, 1):
        conditions.append(Condition(f"block-multiple{delta:+d}" if delta else "block-multiple",
                                    f"prompt of {m} blocks {delta:+d} token(s): block edges (vLLM #44151)", 1,
                                    m * b + delta, n))
    for label, limit, why in (("window", shape.window, "past the sliding window (PR #40898: windowed drafter layers "
                               "run as full attention)"),
                              ("chunk", shape.chunk_size, "past the prefill chunk (a chunk that counts drafts as "
                               "prompt, PR #30618)")):
        if limit is None:
            skipped.append(NotRun(f"past-{label}", f"the {label} size is unknown (--{label}-tokens)"))
        elif limit + SHORT > shape.max_prompt_tokens:
            skipped.append(NotRun(f"past-{label}", f"the {label} ({limit}) + {SHORT} exceeds the longest prompt "
                                  f"({shape.max_prompt_tokens}; --max-prompt-tokens)"))
        else:
            conditions.append(Condition(f"past-{label}", why, 1, limit + SHORT, n))
    conditions.append(Condition("long", f"the longest prompt asked ({shape.max_prompt_tokens} tokens): acceptance "
                                "cliffs and position bugs far out", 1, shape.max_prompt_tokens, max(2, n // 2)))
    long_prefix = min(shape.max_prompt_tokens, max(4 * b, 8 * b))
    conditions.append(Condition("shared-prefix-8", "one long system prompt for every request, concurrent: shared KV "
                                "blocks (LMCache #4345)", 8, long_prefix, max(n, 8), shared_prefix=True))
    conditions.append(Condition("warm-cache", "the same prompts again: prefix-cache hits (vLLM #54360, #43559)", 1,
                                long_prefix, n, cache="warm", shared_prefix=True))
    conditions.append(Condition("multi-turn", "the next turn over the first answer: a hit on blocks that "
                                "speculative rounds committed, not only the prompt's", 1, long_prefix - 2, n,
                                cache="warm", shared_prefix=True, multi_turn=True))
    if shape.can_restart:
        conditions.append(Condition("after-restart", "the same prompts after a restart (vLLM #39273: not "
                                    "reproducible after one)", 1, long_prefix, n, cache="restart", shared_prefix=True))
    else:
        skipped.append(NotRun("after-restart", "the server cannot be restarted from here (give --server-cmd)"))
    conditions.append(Condition("zero-draft-mix-8", "requests that draft nothing batched with ones that draft a lot "
                                "(PR #52942: zero-draft rows read stale state)", 8, SHORT, max(n, 16),
                                zero_draft_mix=True))
    if shape.is_hybrid:
        conditions = [dataclasses.replace(c, why=HYBRID_WHY[c.name]) if c.name in HYBRID_WHY else c
                      for c in conditions]
        skipped = [NotRun(s.name, f"{s.why}; {HYBRID_WHY[s.name]}") if s.name in HYBRID_WHY else s for s in skipped]
    return tuple(conditions), tuple(skipped)


# A hybrid target's recurrent state (Gated DeltaNet: per-request slots, rolled back to the last accepted token,
# snapshots at cached block boundaries) is where 2026's speculative bugs clustered; these conditions reach it, so on a
# hybrid each says how. `--conditions hybrid` runs them alone, beside the gentle one.
HYBRID_WHY = {
    "zero-draft-mix-8": "hybrid: zero-draft rows batched with drafting ones must still commit their own recurrent "
                        "state (vLLM PR #52942: stale state; SGLang #35150: 111/304 wrong at c=8 on a Gated DeltaNet "
                        "target, 0 serial)",
    "shared-prefix-8": "hybrid: concurrent hits on one long system prompt, each resuming the state snapshot at its "
                       "end into its own slot (the snapshot is shared, never written)",
    "warm-cache": "hybrid: a prefix hit resumes the recurrent state from the snapshot at its last block (vLLM #43559: "
                  "~20% accuracy lost with MTP + prefix caching; #54360: hits 0 with speculation on)",
    "multi-turn": "hybrid: the next turn hits blocks committed by verify rounds, whose snapshots come from the kept "
                  "per-position states (a rejected draft's must never be published)",
    "after-restart": "hybrid: n-gram corrupting Gated DeltaNet / Mamba-2 models, gone after a restart (vLLM #39273): "
                     "fresh state slots and no snapshots",
}
HYBRID_CONDITIONS = ("gentle", *HYBRID_WHY)  # what `--conditions hybrid` selects (those the matrix has)
