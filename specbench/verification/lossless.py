"""The lossless rule, once: greedy speculative outputs must equal the k = 0 reference's on the same prompts; a
mismatch whose first divergent token is a near-tied argmax of the target (top-2 margin below a threshold,
backends/near_tie.py) is tolerated unless strict.

Outputs are texts (a server's, the gate's stored run) or token ids (the embedded check); how a mismatch is diagnosed
is the caller's (a reference server's logprobs, the clean target's forward), handed in as `Diagnose`. Front ends:
check/greedy.py, bench/lossless.py (check-lossless), gate/lossless_stage.py; each prints its own lines.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specbench.backends.near_tie import NEAR_TIE, UNCLASSIFIED, TieDiagnosis

Output = str | tuple[int, ...]  # a text, or [num_output_tokens] token ids


def first_divergence(got: Output, expected: Output) -> int | None:
    """Index (character or token) of the first difference, the shorter length when one is a prefix of the other;
    None when equal."""
    for i, (a, b) in enumerate(zip(got, expected)):
        if a != b:
            return i
    return None if len(got) == len(expected) else min(len(got), len(expected))


@dataclass(frozen=True)
class OutputPair:
    """One prompt's (sample's turn's) speculative output beside the reference's."""

    sample_id: str  # the embedded check: the request's index
    turn: int
    spec: Output | None  # None when that side failed
    ref: Output | None
    error: str | None = None  # the failing side's error, "spec: ..." / "ref: ..."
    diagnosis: TieDiagnosis | None = None  # mismatches only: near-tie or divergent at the first divergence

    @property
    def is_identical(self) -> bool:
        return self.error is None and self.spec == self.ref

    @property
    def first_divergence(self) -> int | None:
        """None when identical or failed."""
        if self.error is not None or self.spec == self.ref:
            return None
        return first_divergence(self.spec or (), self.ref or ())


# The mismatched pairs (in order) -> a diagnosis for each. One call for them all: an embedded diagnosis loads the
# clean target once.
Diagnose = Callable[[Sequence[OutputPair]], Sequence[TieDiagnosis]]
NO_PROBE = TieDiagnosis(UNCLASSIFIED, None, (), "no logprobs probe")


def each(probe: Callable[[OutputPair], TieDiagnosis]) -> Diagnose:
    """A Diagnose from a one-pair probe (a server's: one completion per mismatch)."""
    return lambda pairs: [probe(pair) for pair in pairs]


@dataclass(frozen=True)
class LosslessResult:
    pairs: tuple[OutputPair, ...]  # compared (answered on the reference side), in the caller's order
    num_missing: int = 0  # reference answers with no speculative answer to compare

    @property
    def num_identical(self) -> int:
        return sum(p.is_identical for p in self.pairs)

    @property
    def mismatches(self) -> tuple[OutputPair, ...]:
        return tuple(p for p in self.pairs if p.error is None and not p.is_identical)

    @property
    def failures(self) -> tuple[OutputPair, ...]:
        return tuple(p for p in self.pairs if p.error is not None)

    @property
    def is_lossless(self) -> bool:
        return bool(self.pairs) and self.num_identical == len(self.pairs)

    @property
    def num_near_ties(self) -> int:
        return sum(p.diagnosis is not None and p.diagnosis.verdict == NEAR_TIE for p in self.mismatches)

    @property
    def num_divergent(self) -> int:
        """Mismatches not shown to be near-ties (unclassified ones included)."""
        return len(self.mismatches) - self.num_near_ties

    def passes(self, strict: bool) -> bool:
        """Every prompt answered on both sides and no divergent mismatch (strict: no mismatch at all)."""
        if not self.pairs or self.failures or self.num_missing:
            return False
        return not self.mismatches if strict else self.num_divergent == 0


def judge_lossless(pairs: Sequence[OutputPair], diagnose: Diagnose | None, num_missing: int = 0) -> LosslessResult:
    """Every mismatch diagnosed (`diagnose` None: unclassified, so divergent)."""
    pairs = tuple(pairs)
    mismatched = [p for p in pairs if p.error is None and not p.is_identical]
    diagnoses = iter(diagnose(mismatched) if diagnose is not None and mismatched else [NO_PROBE] * len(mismatched))
    diagnosed = tuple(dataclasses.replace(p, diagnosis=next(diagnoses)) if p.error is None and not p.is_identical
                      else p for p in pairs)
    return LosslessResult(diagnosed, num_missing)


def paired_by_key(spec: Sequence[tuple[tuple[str, int], Output]], ref: Sequence[tuple[tuple[str, int], Output]]
                  ) -> tuple[tuple[OutputPair, ...], int]:
    """Outputs keyed (sample_id, turn), paired in speculative order; and how many reference outputs had no
    speculative one."""
    base = dict(ref)
    pairs = tuple(OutputPair(key[0], key[1], out, base[key]) for key, out in spec if key in base)
    return pairs, len(base) - len(pairs)
