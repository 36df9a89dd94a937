"""Warmup requests that never share a prompt with the measured ones.

Warmup exists to pay first-call costs (allocations, kernels, CUDA graphs, connections). Reusing measured prompts
would also put them into a server's prefix cache and shorten the measured TTFT, so warmup prompts are synthetic:
words drawn per (run seed, cell, index), rendered like the workload's prompts (chat template or plain text).
"""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np

from specbench.runs.cell_key import CellKey
from specbench.runs.turns import Turn, TurnPlanner, TurnSettings
from specbench.workloads.base import Message, Prompt, Sample
from specbench.workloads.chat import render_conversation

WARMUP_MAX_TOKENS = 8  # only first-call costs matter; the length does not
WARMUP_CATEGORY = "warmup"
NUM_WARMUP_WORDS = 48
_WORDS = (
    "river stone lantern orbit maple quartz harbor violet meadow copper signal velvet canyon ember falcon "
    "glacier hollow island jasmine kettle ledger marble nectar oyster pepper quiver ribbon saddle timber "
    "umbra vessel willow yonder zephyr anchor bramble cobalt dune estuary fable garnet heron indigo juniper"
).split()


def warmup_turns(
    planner: TurnPlanner, template: Turn, key: CellKey, settings: TurnSettings, num: int, seed: int
) -> list[Turn]:
    """`num` short requests with fresh prompts; `template`: a measured first turn whose sampling they copy."""
    turns = []
    for i in range(num):
        rng = np.random.default_rng(zlib.crc32(f"warmup/{seed}/{key.cell_id}/{i}".encode()))
        text = " ".join(rng.choice(_WORDS, size=NUM_WARMUP_WORDS))
        if settings.chat_template or template.prompt.messages:
            prompt = render_conversation((Message("user", text),), planner.tokenizer,
                                         chat_template=settings.chat_template)
        else:
            prompt = Prompt(text=text)
        sample = Sample(sample_id=f"warmup-{i}", category=WARMUP_CATEGORY, turns=(text,))
        params = dataclasses.replace(template.params, max_tokens=min(template.params.max_tokens, WARMUP_MAX_TOKENS))
        token_ids = planner.encode(prompt)
        if template.token_ids:  # the measured prompt fits the context (preflight): a warmup never outgrows it
            token_ids = token_ids[:len(template.token_ids)]
        turns.append(Turn(sample, 0, prompt, token_ids, params, None))
    return turns
