"""The prefix-caching scenario the greedy and oracle checks rerun: requests that share cached prefixes, on a small KV
pool, in two waves on one engine, checked against engines that recompute every prompt (check/reference.py).

Wave 1, run two requests at a time so later requests find earlier ones' blocks registered:
- a system prompt of two whole blocks before each of the setup's prompts: every request hits it and diverges exactly
  at a block boundary (a drafter whose KV at p read the token at p + 1, EAGLE or MTP, holds other KV in the system
  prompt's last block for each continuation: its cache key must cover that token);
- the first prompt repeated, cut to a block multiple - 1, 0 and + 1 tokens (a whole-prompt hit must leave the block
  of the last token private: vLLM #44151);
- the system prompt's second block moved to the front (a hash that ignored its parent block would hit there).
Wave 2 (multi-turn): the last prompts of wave 1, each followed by its own output and a new question, reusing the
output blocks registered when wave 1's requests finished (the newest token's KV never written: never registered).
The pool holds two requests and little more, so cached blocks are evicted.
"""

from __future__ import annotations

from collections.abc import Sequence

from specbench.sampling_params import SamplingParams

CONCURRENCY = 2


def _repeat_to(tokens: Sequence[int], n: int) -> list[int]:
    return [tokens[i % len(tokens)] for i in range(n)]


def first_wave(prompts: Sequence[Sequence[int]], block_size: int) -> list[list[int]]:
    """Wave 1's prompts from the setup's token prompts (the module docstring)."""
    base = list(prompts[0])
    system = _repeat_to(base[::-1], 2 * block_size)  # reversed: no prompt starts with it by chance
    wave = [system + list(p) for p in prompts]
    for extra in (-1, 0, 1):
        wave.append(_repeat_to(system + base, 3 * block_size + extra))
    wave.append(system[block_size:] + list(prompts[-1]))
    return wave


def second_wave(first: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]], num: int) -> list[list[int]]:
    """The last `num` prompts of wave 1 again (the last to finish: their blocks are the last evicted), each with its
    own output and a new question (another prompt's tail)."""
    return [list(first[i]) + list(outputs[i]) + list(first[(i + 1) % len(first)][-3:])
            for i in range(len(first) - num, len(first))]


def scenario_overrides(block_size: int, longest: int) -> dict:
    """A pool for CONCURRENCY requests of up to `longest` tokens and little more: cached blocks get evicted."""
    per_request = -(-longest // block_size) + 1
    return {"max_concurrency": CONCURRENCY, "num_kv_blocks": CONCURRENCY * per_request + 2}


def run_waves(generate, prompts: Sequence[Sequence[int]], block_size: int, params: SamplingParams) -> list:
    """The outputs (RequestOutput, prompts included) of both waves through `generate(prompts, params)` on one engine:
    what wave 1 cached serves wave 2."""
    first = first_wave(prompts, block_size)
    outs = list(generate(first, params))
    second = second_wave(first, [o.output_token_ids for o in outs], min(3, len(first)))
    return outs + list(generate(second, params))


def longest_request(prompts: Sequence[Sequence[int]], block_size: int, max_tokens: int, num_steps: int) -> int:
    """Tokens the longest request of the scenario may hold (its prompt, output and a round's drafts)."""
    first = first_wave(prompts, block_size)
    longest_first = max(len(p) for p in first) + max_tokens
    return longest_first + 3 + max_tokens + num_steps + 1


def token_prompts(prompts: Sequence, encode) -> list[list[int]]:
    """The setup's prompts as token ids (`encode`: the engine's, for text prompts)."""
    return [encode(p) if isinstance(p, str) else list(p) for p in prompts]


def scenario_engine(setup, tokenizer_encode) -> tuple[list[list[int]], dict]:
    """(the setup's prompts as token ids, the scenario's engine overrides) for a CheckSetup."""
    prompts = token_prompts(setup.prompts, tokenizer_encode)
    bs = setup.engine.block_size
    longest = longest_request(prompts, bs, setup.max_tokens, setup.engine.max_num_steps)
    return prompts, scenario_overrides(bs, longest)


def cache_summary(llm) -> str:
    """What the scenario exercised on an engine: prefix hits, evictions, preemptions (where any)."""
    steps = llm.engine.step_stats
    queried = sum(s.num_prefix_queried_tokens for s in steps)
    hit = sum(s.num_prefix_hit_tokens for s in steps)
    cache = llm.engine.scheduler.block_manager.prefix_cache
    if cache is None:
        return f"prefix caching {llm.engine.parts.prefix_caching}"
    preempted = sum(s.num_preempted for s in steps)
    return (f"{hit}/{queried} prompt tokens from the prefix cache, {cache.num_evictions} evictions"
            + (f", {preempted} preemptions" if preempted else ""))
