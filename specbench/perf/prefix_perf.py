"""Prefix-caching rows of the GPU benchmark (scripts/bench_gpu.py --suite prefix): a shared-prefix multi-turn
workload run on an engine with prefix caching and on one without, same shapes, same tokens.

Workload: `num_conversations` conversations share one system prompt; turn t of a conversation is its whole history
(system prompt, each earlier user message and answer) plus a new user message. All conversations run a turn together,
then the next turn: turn 1 hits the system prompt (after the first conversation registers it), later turns their own
history. Tokens are random ids (dummy weights: only shapes and the hit pattern matter). Reported per engine: mean and
median TTFT (arrival to first token), output tok/s over the whole run, the prefix-cache hit rate (prompt tokens), and
the acceptance length 1 + A / D of requests that started on a cache hit and of those that did not (a cache hit must not
change what is drafted: with synthetic acceptance both sit at the forced rate).
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from specbench.sampling_params import SamplingParams


@dataclass(frozen=True)
class PrefixWorkload:
    num_conversations: int  # conversations running a turn together
    num_turns: int
    system_len: int  # tokens of the shared system prompt
    user_len: int  # tokens of each new user message
    output_len: int  # tokens of each answer
    vocab_size: int  # token ids drawn below it
    seed: int = 0

    def system_prompt(self) -> list[int]:
        return random.Random(self.seed).choices(range(1, self.vocab_size), k=self.system_len)

    def user_message(self, conversation: int, turn: int) -> list[int]:
        rng = random.Random(self.seed * 1_000_003 + conversation * 1009 + turn + 1)
        return rng.choices(range(1, self.vocab_size), k=self.user_len)


@dataclass(frozen=True)
class PrefixRow:
    label: str
    prefix_caching: bool
    num_requests: int
    ttft_ms_mean: float
    ttft_ms_p50: float
    output_tok_s: float  # output tokens of every turn / wall time of the whole workload
    wall_s: float
    hit_rate: float | None  # prompt tokens from the prefix cache / prompt tokens prefilled or hit; None when off
    acceptance_length_hit: float | None  # 1 + A / D over requests that started on a hit; None without drafts
    acceptance_length_miss: float | None  # same over requests that did not

    def to_dict(self) -> dict:
        return asdict(self)


def _acceptance_length(stats) -> float | None:
    rounds = sum(s.num_draft_rounds for s in stats)
    return None if rounds == 0 else 1 + sum(s.num_accepted_tokens for s in stats) / rounds


def run_workload(llm, workload: PrefixWorkload, *, num_steps: int, label: str) -> PrefixRow:
    """Every turn of every conversation on `llm` (its engine idle), turn by turn; the row of the whole run."""
    engine = llm.engine
    engine.set_num_steps(num_steps)
    params = SamplingParams(max_tokens=workload.output_len, ignore_eos=True)
    system = workload.system_prompt()
    histories = [list(system) for _ in range(workload.num_conversations)]
    first_step = len(engine.step_stats)
    outputs = []
    start = time.perf_counter()
    for turn in range(workload.num_turns):
        prompts = [h + workload.user_message(c, turn) for c, h in enumerate(histories)]
        if turn == 0:  # the first conversation alone registers the system prompt the others then hit
            outs = llm.generate(prompts[:1], params) + llm.generate(prompts[1:], params)
        else:
            outs = llm.generate(prompts, params)
        for c, out in enumerate(outs):
            histories[c] = prompts[c] + list(out.output_token_ids)
        outputs += outs
    wall = time.perf_counter() - start
    steps = engine.step_stats[first_step:]
    queried = sum(s.num_prefix_queried_tokens for s in steps)
    ttfts = [(o.stats.emission_times[0] - o.stats.arrival_time) * 1e3 for o in outputs]
    hit = [o.stats for o in outputs if o.stats.num_prefix_hit_tokens > 0]
    miss = [o.stats for o in outputs if o.stats.num_prefix_hit_tokens == 0]
    return PrefixRow(label, engine.parts.prefix_caching == "on", len(outputs), statistics.fmean(ttfts),
                     statistics.median(ttfts), sum(len(o.output_token_ids) for o in outputs) / wall, wall,
                     sum(s.num_prefix_hit_tokens for s in steps) / queried if queried else None,
                     _acceptance_length(hit), _acceptance_length(miss))


def prefix_suite(put: Callable[[str, object], None], build_llm: Callable[[bool], object], workload: PrefixWorkload,
                 *, num_steps: int, warmup: PrefixWorkload | None = None) -> list[PrefixRow]:
    """Caching off, then on (`build_llm(enable_prefix_caching)`: one engine at a time); each row `put` as
    prefix_off / prefix_on. `warmup`: a smaller workload run first on each engine (kernels, graphs), on other
    tokens, its cache reset after."""
    rows = []
    for is_on in (False, True):
        llm = build_llm(is_on)
        if warmup is not None:
            run_workload(llm, warmup, num_steps=num_steps, label="warmup")
            llm.engine.scheduler.block_manager.reset_prefix_cache()
        rows.append(run_workload(llm, workload, num_steps=num_steps,
                                 label=f"prefix caching {'on' if is_on else 'off'}, k={num_steps}"))
        put(f"prefix_{'on' if is_on else 'off'}", rows[-1].to_dict())
        del llm
    return rows


def render_prefix(sections: dict) -> list[str]:
    """The prefix rows as a markdown table (none: nothing)."""
    rows = [sections[k] for k in ("prefix_off", "prefix_on") if k in sections]
    if not rows:
        return []

    def num(x, fmt):
        return "n/a" if x is None else format(x, fmt)

    out = ["", "| run | requests | TTFT mean ms | TTFT p50 ms | output tok/s | hit rate | acc. len (hit) | "
           "acc. len (miss) |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        out.append(f"| {r['label']} | {r['num_requests']} | {r['ttft_ms_mean']:.1f} | {r['ttft_ms_p50']:.1f} | "
                   f"{r['output_tok_s']:.1f} | {num(r['hit_rate'], '.3f')} | "
                   f"{num(r['acceptance_length_hit'], '.2f')} | {num(r['acceptance_length_miss'], '.2f')} |")
    if len(rows) == 2 and rows[0]["ttft_ms_mean"] > 0:
        out.append(f"\nPrefix caching: TTFT x{rows[1]['ttft_ms_mean'] / rows[0]['ttft_ms_mean']:.2f}, output tok/s "
                   f"x{rows[1]['output_tok_s'] / rows[0]['output_tok_s']:.2f} (on / off).")
    return out
