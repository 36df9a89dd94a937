"""Per-request sampling parameters."""

from __future__ import annotations

from dataclasses import dataclass, field

from specbench.errors import SpecbenchError


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
        if self.temperature < 0:
            raise SpecbenchError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise SpecbenchError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k == 0 or self.top_k < -1:
            raise SpecbenchError(f"top_k must be -1 (off) or >= 1, got {self.top_k}")
        if self.max_tokens < 1:
            raise SpecbenchError(f"max_tokens must be >= 1, got {self.max_tokens}")

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0.0 or self.top_k == 1
