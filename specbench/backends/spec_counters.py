"""Server-side speculative-decoding counters from a /metrics scrape, and their difference over a window.

vLLM (and `specbench serve`, which mirrors its names) export `<ns>:spec_decode_num_drafts_total`,
`..._num_draft_tokens_total`, `..._num_accepted_tokens_total` and `..._num_accepted_tokens_per_pos_total{position=
"0".."k-1"}`; SGLang exports only `sglang:spec_verify_calls_total` (verify rounds). Label sets (engines, data-parallel
ranks) are summed. Only differences of counters are meaningful for a window: running gauges (SGLang's
`spec_accept_length`) are deliberately ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.backends.prometheus import Sample

SPEC_DECODE_NAMESPACES = ("vllm", "specbench")


@dataclass(frozen=True, slots=True)
class SpecCounters:
    source: str  # "vllm" | "specbench" | "sglang": whose counter family
    num_drafts: float  # D: verify rounds that carried drafts
    num_draft_tokens: float | None  # T_d; None where not exported (SGLang)
    num_accepted_tokens: float | None  # A; None where not exported (SGLang)
    num_accepted_per_pos: tuple[float, ...]  # [num_positions] A_k, position label 0 first; () if not exported
    num_generation_tokens: float | None  # the server's generation-token counter (all traffic)


def read_spec_counters(samples: Sequence[Sample]) -> SpecCounters | None:
    """The first counter family present (vLLM, specbench, SGLang); None when the server exports none."""
    for namespace in SPEC_DECODE_NAMESPACES:
        drafts = _total(samples, f"{namespace}:spec_decode_num_drafts")
        if drafts is None:
            continue
        per_pos: dict[int, float] = {}
        for sample in _matching(samples, f"{namespace}:spec_decode_num_accepted_tokens_per_pos"):
            position = sample.label("position")
            if position is not None and position.isdigit():
                per_pos[int(position)] = per_pos.get(int(position), 0.0) + sample.value
        return SpecCounters(
            source=namespace,
            num_drafts=drafts,
            num_draft_tokens=_total(samples, f"{namespace}:spec_decode_num_draft_tokens"),
            num_accepted_tokens=_total(samples, f"{namespace}:spec_decode_num_accepted_tokens"),
            num_accepted_per_pos=tuple(per_pos.get(k, 0.0) for k in range(max(per_pos) + 1)) if per_pos else (),
            num_generation_tokens=_total(samples, f"{namespace}:generation_tokens"),
        )
    verify_calls = _total(samples, "sglang:spec_verify_calls")
    if verify_calls is not None:
        return SpecCounters("sglang", verify_calls, None, None, (), _total(samples, "sglang:generation_tokens"))
    return None


def counter_delta(before: SpecCounters | None, after: SpecCounters | None) -> tuple[SpecCounters | None, str | None]:
    """(after - before, None), or (None, why not)."""
    if before is None or after is None:
        return None, "the server's /metrics exports no speculative-decoding counters"
    if before.source != after.source:
        return None, f"the server's counter family changed during the cell ({before.source} -> {after.source})"
    width = max(len(before.num_accepted_per_pos), len(after.num_accepted_per_pos))
    per_pos_before = before.num_accepted_per_pos + (0.0,) * (width - len(before.num_accepted_per_pos))
    per_pos_after = after.num_accepted_per_pos + (0.0,) * (width - len(after.num_accepted_per_pos))
    delta = SpecCounters(
        source=after.source,
        num_drafts=after.num_drafts - before.num_drafts,
        num_draft_tokens=_minus(after.num_draft_tokens, before.num_draft_tokens),
        num_accepted_tokens=_minus(after.num_accepted_tokens, before.num_accepted_tokens),
        num_accepted_per_pos=tuple(a - b for a, b in zip(per_pos_after, per_pos_before)),
        num_generation_tokens=_minus(after.num_generation_tokens, before.num_generation_tokens),
    )
    values = [delta.num_drafts, delta.num_draft_tokens, delta.num_accepted_tokens, delta.num_generation_tokens]
    if any(v is not None and v < 0 for v in [*values, *delta.num_accepted_per_pos]):
        return None, "the server's counters went down during the cell (restarted?)"
    return delta, None


def _matching(samples: Sequence[Sample], base: str) -> list[Sample]:
    """Samples of counter `base` (exposed as `base_total`, or bare by older exporters)."""
    return [s for s in samples if s.name in (f"{base}_total", base)]


def _total(samples: Sequence[Sample], base: str) -> float | None:
    matching = _matching(samples, base)
    return sum(s.value for s in matching) if matching else None


def _minus(after: float | None, before: float | None) -> float | None:
    return None if after is None or before is None else after - before
