"""Acceptance metrics of a set of requests: rate, acceptance length (both weightings), per position, histogram."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from specbench.metrics.definitions import ACCEPTANCE_LENGTH_RTOL
from specbench.metrics.pooled import Pooled
from specbench.metrics.request_metrics import RequestMetrics
from specbench.metrics.specs import ACCEPTANCE_LENGTH, ACCEPTANCE_RATE, position_metric


def _sum_padded(rows: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    width = max((len(r) for r in rows), default=0)
    return tuple(sum(r[k] for r in rows if k < len(r)) for k in range(width))


@dataclass(frozen=True, slots=True)
class AcceptanceMetrics:
    num_draft_rounds: int  # D
    num_draft_tokens: int  # T_d
    num_accepted_tokens: int  # A
    acceptance_rate: float | None  # A / T_d; None without drafts
    acceptance_length: float  # token-weighted 1 + A / D; 1.0 without drafts
    acceptance_length_per_request: float  # mean of 1 + A_i / D_i over requests with D_i >= 1; 1.0 if none
    num_drafted_per_pos: tuple[int, ...]  # [num_positions]
    num_accepted_per_pos: tuple[int, ...]  # [num_positions] A_k
    accept_rate_per_pos: tuple[float, ...]  # [num_positions] p_k = A_k / D; () without drafts
    cond_accept_rate_per_pos: tuple[float | None, ...]  # [num_positions] c_k = A_k / A_{k-1}, A_0 = D
    accepted_histogram: tuple[int, ...]  # [max accepted + 1] rounds accepting exactly j drafts
    acceptance_length_from_positions: float  # 1 + sum_k p_k
    is_consistent: bool  # acceptance_length == 1 + sum_k p_k

    @classmethod
    def of(cls, requests: Sequence[RequestMetrics], pooled: Pooled | None = None) -> AcceptanceMetrics:
        """`pooled`: the requests' pooled counts, if the caller has them (metrics/pooled.py)."""
        if pooled is None:
            pooled = Pooled.cell(requests, 0.0)  # no window: acceptance needs none
        rounds = sum(r.num_draft_rounds for r in requests)
        drafted = sum(r.num_draft_tokens for r in requests)
        accepted = sum(r.num_accepted_tokens for r in requests)
        drafted_per_pos = _sum_padded([r.num_drafted_per_pos for r in requests])
        accepted_per_pos = _sum_padded([r.num_accepted_per_pos for r in requests])
        per_request = [al for r in requests if (al := r.acceptance_length) is not None]

        positions = range(1, len(accepted_per_pos) + 1)
        accept_rate_per_pos = tuple(position_metric(k).cell_value(pooled) for k in positions) if rounds else ()
        previous = (rounds,) + accepted_per_pos[:-1]
        cond = tuple(a / p if p else None for a, p in zip(accepted_per_pos, previous)) if rounds else ()
        histogram = [0] * (max((a for r in requests for a in r.accepted_per_round), default=-1) + 1)
        for r in requests:
            for a in r.accepted_per_round:
                histogram[a] += 1

        acceptance_length = ACCEPTANCE_LENGTH.cell_value(pooled)  # never None: these requests' counts are known
        from_positions = 1.0 + sum(accept_rate_per_pos)
        return cls(
            num_draft_rounds=rounds,
            num_draft_tokens=drafted,
            num_accepted_tokens=accepted,
            acceptance_rate=ACCEPTANCE_RATE.cell_value(pooled),
            acceptance_length=acceptance_length,
            acceptance_length_per_request=sum(per_request) / len(per_request) if per_request else 1.0,
            num_drafted_per_pos=drafted_per_pos,
            num_accepted_per_pos=accepted_per_pos,
            accept_rate_per_pos=accept_rate_per_pos,
            cond_accept_rate_per_pos=cond,
            accepted_histogram=tuple(histogram),
            acceptance_length_from_positions=from_positions,
            is_consistent=math.isclose(acceptance_length, from_positions, rel_tol=ACCEPTANCE_LENGTH_RTOL),
        )
