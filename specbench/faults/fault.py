"""What a fault is (the catalog's facts) and the base class every mutant's hooks derive from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from specbench.runtime.hooks import PhaseHooks, mutant_label
from specbench.speculation import registry
from specbench.speculation.capabilities import Proposer


@dataclass(frozen=True)
class Layer:
    """What the faults of a layer break, and which check should catch them (selftest --list-faults)."""

    breaks: str
    caught_by: str


LAYERS: dict[str, Layer] = {
    "draft": Layer("lowers acceptance only", "oracle, baseline"),
    "target": Layer("corrupts the output", "greedy"),
    "sampling": Layer("corrupts sampled output only", "sampled"),
    "metrics": Layer("corrupts recorded statistics only", "metrics"),
    "logprobs": Layer("corrupts reported logprobs only", "gate's logprobs stage, not the selftest"),
    "speed": Layer("slows speculation only", "gate's speed stage, not the selftest"),
    "grammar": Layer("corrupts grammar-constrained output only", "greedy (the selftest's constrained rows), gate's "
                     "structured stage"),
    "stress": Layer("corrupts the output (or stops drafting, or prefix caching) only under one condition: "
                    "concurrency, length, batch shape, zero-draft rounds, a warm cache", "`specbench stress`, not the "
                    "gentle gate"),
}


@dataclass(frozen=True)
class Fault:
    name: str
    description: str  # what it breaks, in one line
    seed: str  # the seed PR it reproduces (/work/shared/seeds), or "" for target-side classics
    layer: str  # "draft" (lowers acceptance only), "target" (corrupts output), "sampling" (corrupts sampled output
    # only), "metrics" (corrupts recorded statistics only), "logprobs" (corrupts reported logprobs only), "grammar"
    # (corrupts grammar-constrained output only), "speed"
    # (slows speculation only), "stress" (only under one condition: faults/conditional.py)
    # What hosts the hook, asked of the proposer classes: a capability (speculation/capabilities.py; `Proposer`:
    # every speculative method) or the one proposer class whose code it bends; None: no speculative method.
    hosts: type[Proposer] | None
    path: str = ""  # the fast production path it bends (issue 25's path names); "" = a phase-hook mutant
    is_plain_hosted: bool = False  # the plain engine (method none) hosts it too
    caught_by: str = ""  # the check that should catch it where its layer's (LAYERS) is not the one

    @property
    def catcher(self) -> str:
        return self.caught_by or LAYERS[self.layer].caught_by

    @property
    def help_line(self) -> str:
        """`name: what it breaks (layer: what that means; caught by: check)`, one line per fault in help."""
        return f"{self.name}: {self.description} ({LAYERS[self.layer].breaks}; caught by {self.catcher})"

    @property
    def methods(self) -> tuple[str, ...]:
        """The methods whose engines host it: `none` first when the plain engine does, then every registered method
        whose class is a `hosts` (read from the registry when asked, so a new proposer class is picked up)."""
        speculative = () if self.hosts is None else registry.methods_with(self.hosts)
        return ("none", *speculative) if self.is_plain_hosted else speculative


class Mutant(PhaseHooks):
    """One injected bug; an instance lives as long as its engine and holds the state the bug leaks."""

    fault: ClassVar[Fault]
    # A mutant engine drafts phase by phase, so every draft hook runs (never a whole-round graph).
    eager_drafting = True

    def install(self, engine) -> None:
        """Bend the built engine from outside, once (path mutants, a metrics mutant's statistics); a phase-hook mutant
        needs nothing here."""


__all__ = ["LAYERS", "Fault", "Layer", "Mutant", "mutant_label"]
