"""The near-tie probe for an embedded engine: at the first character where the k output departs from the k = 0 one,
the clean target's top-2 log-probability margin (nats), as check's greedy check and check-lossless classify.

The probe rebuilds the clean target (no draft, no fault) once, on the first mismatch. The run stored texts, not token
ids, so the k = 0 text is re-tokenised; a generated text may tokenise differently from the ids that produced it, so
the margin is read in a context that can differ slightly from the engine's (a near-tie stays a near-tie unless the
re-tokenisation moves it).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specbench.backends.near_tie import UNCLASSIFIED, TieDiagnosis, classify
from specbench.runs.sweep_config import SweepConfig

if TYPE_CHECKING:
    from specbench import LLM


@dataclass(frozen=True)
class _CleanTarget:
    llm: LLM  # plain decoding: no draft, no fault
    prompts: dict[tuple[str, int], tuple[int, ...]]  # (sample_id, turn) -> [num_prompt_tokens] first turns' ids


def embedded_probe(config: SweepConfig, margin: float) -> Callable[[str, int, str, str], TieDiagnosis]:
    @functools.cache
    def target() -> _CleanTarget:  # built on the first mismatch only
        return _load(config)

    def probe(sample_id: str, turn: int, ref_text: str, spec_text: str) -> TieDiagnosis:
        clean = target()
        prompt = clean.prompts.get((sample_id, turn))
        if not prompt:
            return TieDiagnosis(UNCLASSIFIED, None, (), "no prompt token ids for this turn")
        return _diagnose(clean.llm, prompt, ref_text, spec_text, margin, config.engine.block_size)

    return probe


def _load(config: SweepConfig) -> _CleanTarget:
    import dataclasses

    from specbench import LLM
    from specbench.verification.first_turns import first_turns

    llm = LLM(dataclasses.replace(config.engine, method="none", draft=None, max_num_steps=0))
    planned = first_turns(config, llm.tokenizer, tokenize=True)
    return _CleanTarget(llm, {(t.sample.sample_id, 0): t.token_ids for t in planned.turns})


def _diagnose(llm: LLM, prompt: tuple[int, ...], ref_text: str, spec_text: str, threshold: float,
              block_size: int) -> TieDiagnosis:
    from specbench.check.near_tie_margin import top_two

    diverge = next((i for i, (a, b) in enumerate(zip(ref_text, spec_text)) if a != b),
                   min(len(ref_text), len(spec_text)))
    tokenizer = llm.tokenizer
    ids = tuple(tokenizer.encode(ref_text, add_special_tokens=False))
    # the first token whose decoded prefix reaches past the divergent character
    position = next((i for i in range(len(ids)) if len(tokenizer.decode(ids[:i + 1])) > diverge), None)
    if position is None:
        return TieDiagnosis(UNCLASSIFIED, None, (), "the k = 0 text ends where the k text goes on")
    top = top_two(llm.engine.runner.model, prompt, ids, position, block_size=block_size)
    candidates = tuple(tokenizer.decode([t]) for t in top.token_ids)
    return TieDiagnosis(classify(top.margin, threshold), top.margin, candidates, None)
