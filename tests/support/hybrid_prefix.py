"""Prefix-cache runs of the hybrid (Qwen3-Next) tests: a shared system prompt, different suffixes (prompt lengths an
exact multiple of the block size and one either side), then multi-turn follow-ups over the first turn's output; run
in waves on one engine so later requests hit blocks (and state snapshots) earlier ones registered, with the state
oracle (INV-STATE) after every step."""

from __future__ import annotations

from tests.support.hybrid_runs import run_with_oracle

BLOCK_SIZE = 4  # hybrid_llm's
SYSTEM_BLOCKS = 5  # the shared system prompt: 20 tokens, whole blocks
MAX_TOKENS = 8


def system_prompt(prompts: list[list[int]]) -> list[int]:
    """Whole blocks of a prompt's tokens, reversed so no test prompt starts with them by chance."""
    return list(reversed(prompts[1]))[: SYSTEM_BLOCKS * BLOCK_SIZE]


def first_turns(prompts: list[list[int]]) -> list[list[int]]:
    """The system prompt before each prompt's tail, cut so the lengths straddle block multiples (-1, 0, +1)."""
    system = system_prompt(prompts)
    turns = []
    for i, p in enumerate(prompts):
        total = len(system) + BLOCK_SIZE * (1 + i % 3) + (i % 3 - 1)  # 23, 28, 33: 6 blocks - 1, 7 blocks, 8 + 1
        turns.append((system + p + p)[:total])
    return turns


def follow_ups(turns: list[list[int]], outputs: list[list[int]], prompts: list[list[int]]) -> list[list[int]]:
    """Multi-turn: each first turn, its own output and a new question (another prompt's head)."""
    return [t + o + prompts[(i + 1) % len(prompts)][:5] for i, (t, o) in enumerate(zip(turns, outputs))]


def run_waves(llm, prompts: list[list[int]]):
    """(outputs of the warm-up, the first turns and the follow-ups, in that order; every prompt run; the worst
    INV-STATE difference; slots checked). The warm-up request caches the system prompt, the first turns (more than
    the engine's concurrency) hit it, the follow-ups hit the first turns' prompt and output blocks."""
    warm = [system_prompt(prompts) + prompts[0][:3]]
    turns = first_turns(prompts)
    outs, worst, num_checked = [], 0.0, 0
    for wave in (warm, turns, None):
        if wave is None:
            wave = follow_ups(turns, [list(o.output_token_ids) for o in outs[1:]], prompts)
        wave_outs, wave_worst, wave_checked = run_with_oracle(llm, wave, max_tokens=MAX_TOKENS)
        outs.extend(wave_outs)
        worst, num_checked = max(worst, wave_worst), num_checked + wave_checked
    return outs, worst, num_checked


def hit_tokens(llm) -> tuple[int, int]:
    """(prompt tokens served from the prefix cache, prompt tokens queried) over the engine's steps."""
    steps = llm.engine.step_stats
    return sum(s.num_prefix_hit_tokens for s in steps), sum(s.num_prefix_queried_tokens for s in steps)
