"""What a fault is (the catalog's facts) and the base class every mutant's hooks derive from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from specbench.runtime.hooks import PhaseHooks, mutant_label


@dataclass(frozen=True)
class Fault:
    name: str
    description: str
    seed: str  # the seed PR it reproduces (/work/shared/seeds), or "" for target-side classics
    layer: str  # "draft" (lowers acceptance only), "target" (corrupts output), "sampling" (corrupts sampled output
    # only), "metrics" (corrupts recorded statistics only), "logprobs" (corrupts reported logprobs only), "speed"
    # (slows speculation only)
    methods: tuple[str, ...]  # proposers hosting the hook (target-side faults: every speculative method)
    path: str = ""  # the fast production path it bends (issue 25's path names); "" = a phase-hook mutant


ALL_METHODS = ("draft", "eagle", "eagle3", "mtp", "ngram")
EAGLE_METHODS = ("eagle", "eagle3", "mtp")  # the EAGLE round machinery (mtp runs its MTP module through it)
DRAFT_SIDE = ("draft", "eagle", "eagle3", "mtp")  # proposers with a draft KV cache and draft-decode steps


class Mutant(PhaseHooks):
    """One injected bug; an instance lives as long as its engine and holds the state the bug leaks."""

    fault: ClassVar[Fault]
    # A mutant engine drafts phase by phase, so every draft hook runs (never a whole-round graph).
    eager_drafting = True

    def install(self, engine) -> None:
        """Bend the built engine from outside, once (path mutants, a metrics mutant's statistics); a phase-hook mutant
        needs nothing here."""


__all__ = ["ALL_METHODS", "DRAFT_SIDE", "EAGLE_METHODS", "Fault", "Mutant", "mutant_label"]
