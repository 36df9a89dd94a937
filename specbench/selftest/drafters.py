"""The selftest's tiny drafter per speculative method: every proposer registered in speculation/registry.py (but `none`)
has one here, so a new method cannot land outside the selftest (tests/check/test_selftest_methods.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from specbench.registry import Registry
from specbench.selftest.tiny import random_prompts

NUM_PROMPTS = 6


@dataclass(frozen=True)
class TinyPair:
    """One seed's tiny target and draft LM (tiny.py), written under `root`."""
    root: str
    seed: int
    target: str
    draft: str


@dataclass(frozen=True)
class MethodModels:
    target: str  # the target the method's engine verifies with
    draft: str | None  # the method's draft model or head; None for n-gram and MTP (the target ships it)
    prompts: tuple[tuple[int, ...], ...]  # [NUM_PROMPTS] token ids the method drafts on


# pair, the check engine config (for engines the builder runs) -> the method's models and prompts
TINY_DRAFTERS: Registry[MethodModels] = Registry("selftest method")


def _random(pair: TinyPair) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(p) for p in random_prompts(NUM_PROMPTS, seed=pair.seed))


@TINY_DRAFTERS.register("draft")
def _draft(pair: TinyPair, engine_config) -> MethodModels:
    return MethodModels(pair.target, pair.draft, _random(pair))


@TINY_DRAFTERS.register("eagle")
def _eagle(pair: TinyPair, engine_config) -> MethodModels:
    from specbench.selftest.tiny_eagle1 import build_tiny_eagle1_head

    head = build_tiny_eagle1_head(pair.target, f"{pair.root}/eagle", pair.seed)
    return MethodModels(pair.target, head, _random(pair))


@TINY_DRAFTERS.register("eagle3")
def _eagle3(pair: TinyPair, engine_config) -> MethodModels:
    from specbench.selftest.tiny_eagle import build_tiny_eagle_head

    return MethodModels(pair.target, build_tiny_eagle_head(pair.target, f"{pair.root}/eagle3"), _random(pair))


@TINY_DRAFTERS.register("mtp")
def _mtp(pair: TinyPair, engine_config) -> MethodModels:
    from specbench.selftest.tiny_mtp import MTP_PREFIX, build_mtp_target

    # The tiny target is Llama-like: its MTP module ships in Qwen3-Next's `mtp.*` names (the GLM-4.5 / DeepSeek-V3
    # layer-index names are tested on a GLM-4.5 target: tests/mtp/test_mtp_engine.py, test_mtp_vs_hf.py).
    target = build_mtp_target(pair.target, f"{pair.root}/mtp-target", MTP_PREFIX, pair.seed)
    return MethodModels(target, None, _random(pair))


@TINY_DRAFTERS.register("ngram")
def _ngram(pair: TinyPair, engine_config) -> MethodModels:
    from specbench.selftest.tiny import build_tiny_pair
    from specbench.selftest.tiny_ngram import build_copying_target, repeating_prompts

    # The copying target is made from the seed's biased target whatever its variant: the n-gram proposer's paths do
    # not depend on the target's layers (the other methods cover those), and the biased positional heads copy
    # reliably enough that every seed's prompts draft (the variants' copies draft a third as often).
    biased, _ = build_tiny_pair(f"{pair.root}/ngram-base", seed=pair.seed, variant="biased")
    target = build_copying_target(biased, f"{pair.root}/ngram-target")
    prompts = repeating_prompts(target, NUM_PROMPTS, pair.seed, engine_config)
    return MethodModels(target, None, tuple(tuple(p) for p in prompts))


def selftest_methods() -> tuple[str, ...]:
    """Every speculative method of the proposer registry, in its order."""
    from specbench.speculation.registry import speculative_methods

    return speculative_methods()


def build_method(method: str, pair: TinyPair, engine_config) -> MethodModels:
    builder: Callable[[TinyPair, object], MethodModels] = TINY_DRAFTERS.get(method)
    return builder(pair, engine_config)
