"""Per-request sampling parameters."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from specbench.errors import SpecbenchError

MAX_TOKENS = 2**24  # far above any context; a larger request is a typo or hostile


@dataclass(frozen=True, slots=True)
class SamplingParams:
    temperature: float = 0.0  # 0 means greedy
    top_k: int = -1  # -1 disables
    top_p: float = 1.0
    max_tokens: int = 128
    ignore_eos: bool = False
    seed: int | None = None  # per-request seed; sampled runs are reproducible when set
    stop: tuple[str, ...] = field(default_factory=tuple)  # stop strings, matched on decoded text

    def __post_init__(self) -> None:
        if not self.temperature >= 0 or self.temperature == math.inf:  # NaN fails `>= 0`
            raise SpecbenchError(f"temperature must be >= 0 and finite, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise SpecbenchError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k == 0 or self.top_k < -1:
            raise SpecbenchError(f"top_k must be -1 (off) or >= 1, got {self.top_k}")
        if not 1 <= self.max_tokens <= MAX_TOKENS:
            raise SpecbenchError(f"max_tokens must be in [1, {MAX_TOKENS}], got {self.max_tokens}")
        if self.seed is not None and not -(2**63) <= self.seed < 2**64:  # what torch's manual_seed takes
            raise SpecbenchError(f"seed must be in [-2**63, 2**64), got {self.seed}")

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0.0 or self.top_k == 1
