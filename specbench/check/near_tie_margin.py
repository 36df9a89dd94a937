"""The clean target's top-2 margin at one output position: how a greedy mismatch is told a near-tied argmax (below
NEAR_TIE_MARGIN nats, backends/near_tie.py) from a real divergence on an embedded engine. Check's greedy check and
the gate's embedded probe both measure it here; a server is probed over HTTP instead (near_tie.diagnose)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from specbench.check.target_probs import next_token_probs
from specbench.sampling_params import SamplingParams


@dataclass(frozen=True)
class TopTwo:
    margin: float  # nats: log p(top-1) - log p(top-2); inf when the second has probability 0
    token_ids: tuple[int, int]  # the top-2 tokens


def top_two(model, prompt: tuple[int, ...], output: tuple[int, ...], position: int, *, block_size: int) -> TopTwo:
    """`model`: a clean target (engine.runner.model); the distribution of output token `position` given the prompt
    and output[:position], by a dense forward (check/target_probs.py)."""
    probs = next(next_token_probs(model, [prompt], [output[:position + 1]], SamplingParams(temperature=1.0),
                                  block_size=block_size))  # [1, position + 1, vocab]
    top = probs[0, position].double().topk(2)
    first, second = (float(v) for v in top.values)
    return TopTwo(math.log(first) - math.log(second) if second > 0 else math.inf,
                  (int(top.indices[0]), int(top.indices[1])))
