"""Statistics the engine records per request and per step (raw; metrics are derived later)."""

from __future__ import annotations

from dataclasses import dataclass, field

from specbench.speculation.verify.tree_stats import TreeAcceptanceCounts, merge


@dataclass(slots=True)
class RequestStats:
    """Filled by the engine while a request runs. Times are `time.perf_counter()` seconds."""

    arrival_time: float  # when the request became eligible to run
    num_prompt_tokens: int
    first_scheduled_time: float | None = None
    # One entry per emission (the moment tokens left the device); an emission may carry several tokens.
    emission_times: list[float] = field(default_factory=list)
    tokens_per_emission: list[int] = field(default_factory=list)
    num_draft_rounds: int = 0  # verify rounds in which at least one draft token was proposed
    num_draft_tokens: int = 0  # draft tokens proposed over all rounds
    num_accepted_tokens: int = 0  # draft tokens accepted over all rounds
    # [num_steps]: rounds in which draft position i was proposed / accepted (accepted i implies accepted < i)
    num_drafted_per_pos: list[int] = field(default_factory=list)
    num_accepted_per_pos: list[int] = field(default_factory=list)
    # [num_draft_rounds]: accepted draft tokens in each round, in order
    accepted_per_round: list[int] = field(default_factory=list)
    num_preemptions: int = 0
    num_prefix_hit_tokens: int = 0  # tokens its prefills started with from the prefix cache (every admission)
    # Prompt tokens its first admission took from the prefix cache (vLLM's per-request num_cached_tokens; over HTTP
    # the server's usage.prompt_tokens_details.cached_tokens); None: no prefix cache, or the server said nothing.
    num_cached_prompt_tokens: int | None = None
    # tree rounds only (eagle_topk > 1): acceptance per depth / sibling rank, tree sizes; None for chains
    tree_counts: TreeAcceptanceCounts | None = None

    @property
    def num_output_tokens(self) -> int:
        return sum(self.tokens_per_emission)

    def record_round(self, num_drafted: int, num_accepted: int) -> None:
        """Count one verify round (rounds with no drafts are not draft rounds)."""
        if num_drafted == 0:
            return
        self.num_draft_rounds += 1
        self.num_draft_tokens += num_drafted
        self.num_accepted_tokens += num_accepted
        self.accepted_per_round.append(num_accepted)
        for i in range(num_drafted):
            self.num_drafted_per_pos[i] += 1
        for i in range(num_accepted):
            self.num_accepted_per_pos[i] += 1

    def record_tree_round(self, num_nodes: int, depth: int, num_accepted: int,
                          counts: TreeAcceptanceCounts) -> None:
        """Count one tree round: the chain fields read per depth (position i = depth i: drafted when the tree
        reaches depth i, accepted when the path does), the tree's own counts merged into tree_counts."""
        self.num_draft_rounds += 1
        self.num_draft_tokens += num_nodes
        self.num_accepted_tokens += num_accepted
        self.accepted_per_round.append(num_accepted)
        for i in range(depth):
            self.num_drafted_per_pos[i] += 1
        for i in range(num_accepted):
            self.num_accepted_per_pos[i] += 1
        self.tree_counts = counts if self.tree_counts is None else merge(self.tree_counts, counts)

    @property
    def finish_time(self) -> float | None:
        return self.emission_times[-1] if self.emission_times else None


@dataclass(frozen=True, slots=True)
class StepStats:
    """One row per engine step."""

    step: int
    start_time: float  # perf_counter seconds
    phase: str  # "prefill" | "decode" | "mixed" (chunked prefill: decode/verify rows and prompt chunks)
    num_reqs: int
    num_scheduled_tokens: int  # target query tokens in this step's forward
    num_draft_tokens: int
    num_accepted_tokens: int
    num_preempted: int
    num_free_blocks: int
    draft_ms: float  # proposer time (catch-up + draft steps)
    target_ms: float  # target forward
    sample_ms: float  # verify / sampling
    step_ms: float  # wall time of the whole step
    # prefill steps with prefix caching on: tokens of the admitted requests' prefills, and of those served from the
    # prefix cache (engine/prefix_reuse.py); 0 otherwise
    num_prefix_queried_tokens: int = 0
    num_prefix_hit_tokens: int = 0
