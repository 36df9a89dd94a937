"""Server-side speculative-decoding counters from a /metrics scrape, and their difference over a window.

vLLM (and `specbench serve` and llama.cpp's server, under their own namespaces) export
`<ns>:spec_decode_num_drafts_total`, `..._num_draft_tokens_total`, `..._num_accepted_tokens_total` and
`..._num_accepted_tokens_per_pos_total{position="0".."n-1"}`; SGLang exports only `sglang:spec_verify_calls_total`
(verify rounds). Label sets (engines, data-parallel ranks) are summed. Only differences of counters are meaningful
for a window: running gauges (SGLang's `spec_accept_length`) are deliberately ignored. Which family a server speaks
is chosen by server_adapters.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.backends.prometheus import Sample


@dataclass(frozen=True, slots=True)
class SpecCounters:
    source: str  # whose counter family: "vllm" | "specbench" | "llamacpp" | "sglang"
    num_drafts: float  # D: verify rounds that carried drafts
    num_draft_tokens: float | None  # T_d; None where not exported (SGLang)
    num_accepted_tokens: float | None  # A; None where not exported (SGLang)
    # [num_positions] A_k, position label 0 first; () if not exported. As long as the longest draft the server
    # allows (llama.cpp sizes it to its draft n_max, which n-gram drafts may reach), not --num-steps.
    num_accepted_per_pos: tuple[float, ...]
    num_generation_tokens: float | None  # the server's generation-token counter (all traffic)


def read_vllm_style(samples: Sequence[Sample], namespace: str, generation_counter: str) -> SpecCounters | None:
    """`<ns>:spec_decode_num_drafts` / `_num_draft_tokens` / `_num_accepted_tokens` / `_num_accepted_tokens_per_pos
    {position=}` (vLLM's names; specbench serve and llama.cpp's server use the same under their namespace)."""
    drafts = _total(samples, f"{namespace}:spec_decode_num_drafts")
    if drafts is None:
        return None
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
        num_generation_tokens=_total(samples, f"{namespace}:{generation_counter}"),
    )


def read_sglang(samples: Sequence[Sample]) -> SpecCounters | None:
    """SGLang exports only verify rounds as a counter."""
    verify_calls = _total(samples, "sglang:spec_verify_calls")
    if verify_calls is None:
        return None
    return SpecCounters("sglang", verify_calls, None, None, (), _total(samples, "sglang:generation_tokens"))


def has_namespace(samples: Sequence[Sample], namespace: str) -> bool:
    return any(s.name.startswith(f"{namespace}:") for s in samples)


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
