"""Every threshold a gate stage applies, one value each (the CLI's options, the report's 'tolerance' column)."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.backends.near_tie import NEAR_TIE_MARGIN
from specbench.errors import SpecbenchError


@dataclass(frozen=True)
class Tolerances:
    near_tie_margin: float = NEAR_TIE_MARGIN  # lossless: nats; a mismatch below it is a near-tie
    strict: bool = False  # lossless: near-ties fail too
    accuracy_drop: float = 0.02  # accuracy: allowed drop (fraction) before noise is added
    accuracy_z: float = 1.645  # accuracy: one-sided 95% normal quantile on the combined stderr
    acceptance_rtol: float = 0.1  # acceptance: |AL / AL_ref - 1| allowed (vLLM's style)
    acceptance_alpha: float = 0.01  # acceptance: false-alarm rate of the per-position drop test (Bonferroni)
    acceptance_floor: float | None = None  # acceptance: TensorRT-LLM style, rate_k >= floor x reference rate_k
    speed_min_change: float = 5.0  # speed: % change smaller than this is never called a regression
    confidence: float = 0.95  # speed: confidence of the run-to-run interval
    logprobs_atol: float | None = None  # logprobs: nats per token; None: by dtype (logprobs_stage.py)
    logprobs_ppl_rtol: float | None = None  # logprobs: per prompt |ppl / ppl_ref - 1|; None: by dtype
    logprobs_off_fraction: float = 0.01  # logprobs: fraction of compared tokens allowed beyond atol

    def __post_init__(self) -> None:
        for flag, value, ok in (("--near-tie-margin", self.near_tie_margin, self.near_tie_margin >= 0),
                                ("--accuracy-drop", self.accuracy_drop, 0 <= self.accuracy_drop <= 1),
                                ("--acceptance-rtol", self.acceptance_rtol, self.acceptance_rtol >= 0),
                                ("--acceptance-alpha", self.acceptance_alpha, 0 < self.acceptance_alpha < 1),
                                ("--speed-min-change", self.speed_min_change, self.speed_min_change >= 0),
                                ("--confidence", self.confidence, 0 < self.confidence < 1),
                                ("--logprobs-atol", self.logprobs_atol,
                                 self.logprobs_atol is None or self.logprobs_atol > 0),
                                ("--logprobs-ppl-rtol", self.logprobs_ppl_rtol,
                                 self.logprobs_ppl_rtol is None or self.logprobs_ppl_rtol > 0),
                                ("--logprobs-off-fraction", self.logprobs_off_fraction,
                                 0 <= self.logprobs_off_fraction < 1)):
            if not ok:
                raise SpecbenchError(f"{flag} {value}: out of range")
        if self.acceptance_floor is not None and not 0 < self.acceptance_floor <= 1:
            raise SpecbenchError(f"--acceptance-floor {self.acceptance_floor}: must be in (0, 1], e.g. 0.95")
