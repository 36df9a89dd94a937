"""Per-request metrics derived from the engine's RequestStats (definitions in metrics/definitions.py)."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.engine.stats import RequestStats
from specbench.metrics import definitions
from specbench.speculation.verify.tree_stats import TreeAcceptanceCounts


@dataclass(frozen=True, slots=True)
class RequestMetrics:
    arrival_time: float  # perf_counter seconds
    finish_time: float | None  # last emission; None when nothing was emitted
    num_prompt_tokens: int
    num_output_tokens: int
    num_emissions: int
    ttft_s: float | None  # None when nothing was emitted
    tpot_s: float | None  # None when fewer than 2 output tokens
    e2e_s: float | None
    itl_s: tuple[float, ...]  # [num_emissions - 1] gaps between consecutive emissions
    tokens_per_emission: float | None  # num_output_tokens / num_emissions
    num_draft_rounds: int
    num_draft_tokens: int
    num_accepted_tokens: int
    num_drafted_per_pos: tuple[int, ...]  # [num_positions] rounds proposing draft position k+1
    num_accepted_per_pos: tuple[int, ...]  # [num_positions] rounds accepting draft position k+1
    accepted_per_round: tuple[int, ...]  # [num_draft_rounds] accepted drafts in each round
    num_preemptions: int
    tree: TreeAcceptanceCounts | None = None  # tree rounds (eagle_topk > 1): per depth / rank, sizes; None: chains

    @property
    def acceptance_length(self) -> float | None:
        """1 + A_i / D_i; None without draft rounds."""
        if self.num_draft_rounds == 0:
            return None
        return definitions.acceptance_length(self.num_accepted_tokens, self.num_draft_rounds)

    @property
    def acceptance_rate(self) -> float | None:
        if self.num_draft_tokens == 0:
            return None
        return definitions.acceptance_rate(self.num_accepted_tokens, self.num_draft_tokens)

    @classmethod
    def from_stats(cls, stats: RequestStats, num_output_tokens: int | None = None) -> RequestMetrics:
        """`num_output_tokens` overrides the emitted count (e.g. after stop-string truncation)."""
        times = stats.emission_times
        if len(times) != len(stats.tokens_per_emission):
            raise ValueError(
                f"{len(times)} emission times but {len(stats.tokens_per_emission)} token counts in RequestStats"
            )
        num_tokens = stats.num_output_tokens if num_output_tokens is None else num_output_tokens
        ttft = times[0] - stats.arrival_time if times else None
        e2e = times[-1] - stats.arrival_time if times else None
        tpot = (e2e - ttft) / (num_tokens - 1) if e2e is not None and ttft is not None and num_tokens >= 2 else None
        return cls(
            arrival_time=stats.arrival_time,
            finish_time=times[-1] if times else None,
            num_prompt_tokens=stats.num_prompt_tokens,
            num_output_tokens=num_tokens,
            num_emissions=len(times),
            ttft_s=ttft,
            tpot_s=tpot,
            e2e_s=e2e,
            itl_s=tuple(b - a for a, b in zip(times, times[1:])),
            tokens_per_emission=definitions.tokens_per_emission(num_tokens, len(times)) if times else None,
            num_draft_rounds=stats.num_draft_rounds,
            num_draft_tokens=stats.num_draft_tokens,
            num_accepted_tokens=stats.num_accepted_tokens,
            num_drafted_per_pos=tuple(stats.num_drafted_per_pos),
            num_accepted_per_pos=tuple(stats.num_accepted_per_pos),
            accepted_per_round=tuple(stats.accepted_per_round),
            num_preemptions=stats.num_preemptions,
            tree=stats.tree_counts,
        )
