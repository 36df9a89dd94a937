"""Goodput under service-level objectives (definitions.py, "Goodput"): vLLM's rule, a request is good when it
meets every bound given."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.errors import SpecbenchError
from specbench.metrics.request_metrics import RequestMetrics

# --goodput keys -> the RequestMetrics field each bounds (seconds); the flag takes milliseconds.
SLO_FIELDS = {"ttft": "ttft_s", "tpot": "tpot_s", "e2el": "e2e_s"}


@dataclass(frozen=True, slots=True)
class SloBounds:
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2el_ms: float | None = None

    @property
    def is_set(self) -> bool:
        return any(v is not None for v in (self.ttft_ms, self.tpot_ms, self.e2el_ms))

    def describe(self) -> str | None:
        """Canonical text, e.g. "ttft:200,tpot:50" (ms); None without bounds."""
        bounds = {key: getattr(self, f"{key}_ms") for key in SLO_FIELDS}
        parts = [f"{key}:{bound:g}" for key, bound in bounds.items() if bound is not None]
        return ",".join(parts) or None

    def is_good(self, request: RequestMetrics) -> bool:
        """Every given bound met. A request that emitted nothing has no TTFT/E2E and is not good; TPOT is
        undefined below 2 output tokens and then counts as met (vLLM counts it as 0)."""
        for key, field in SLO_FIELDS.items():
            bound = getattr(self, key + "_ms")
            if bound is None:
                continue
            value = getattr(request, field)
            if value is None:
                if key == "tpot" and request.num_emissions > 0:
                    continue
                return False
            if value * 1e3 > bound:
                return False
        return True


def parse_goodput(items: Sequence[str]) -> SloBounds:
    """("ttft:200", "tpot:50") -> SloBounds; items KEY:MS (KEY: ttft, tpot, e2el), also comma- or space-joined."""
    values: dict[str, float] = {}
    for item in (part for text in items for part in text.replace(",", " ").split()):
        key, sep, number = item.partition(":")
        if not sep or key not in SLO_FIELDS:
            raise SpecbenchError(f"--goodput {item!r}: expected KEY:MS with KEY one of {', '.join(SLO_FIELDS)}")
        try:
            value = float(number)
        except ValueError:
            raise SpecbenchError(f"--goodput {item!r}: {number!r} is not a number of milliseconds") from None
        if not value > 0 or value == float("inf"):
            raise SpecbenchError(f"--goodput {item!r}: the bound must be a finite number of ms > 0")
        if key in values:
            raise SpecbenchError(f"--goodput: {key} given twice")
        values[key] = value
    return SloBounds(**{f"{key}_ms": value for key, value in values.items()})


@dataclass(frozen=True, slots=True)
class Goodput:
    num_good_requests: int
    good_request_fraction: float | None  # good / all measured requests (failed ones count as not good)
    request_goodput: float | None  # good requests / s of the measured window
    output_goodput: float | None  # output tokens of good requests / s

    @classmethod
    def of(cls, good_output_tokens: Sequence[int], num_requests: int, duration_s: float) -> Goodput:
        """`good_output_tokens`: output tokens of each good request; `num_requests`: every measured request,
        failed ones included; `duration_s`: the cell's measured window."""
        num_good = len(good_output_tokens)
        per_second = (lambda n: n / duration_s) if duration_s > 0 else (lambda n: None)
        return cls(
            num_good_requests=num_good,
            good_request_fraction=num_good / num_requests if num_requests else None,
            request_goodput=per_second(num_good),
            output_goodput=per_second(sum(good_output_tokens)),
        )
