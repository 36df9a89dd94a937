"""Metrics-side: a round that rejected a draft records one more accepted draft than it had (the recovered token
counted as accepted). The output tokens are untouched, and every per-request acceptance counter moves together
(A, A_k, the per-round list), so the counters stay consistent with each other and acceptance only rises: only a
recomputation from other raw records (the steps' accepted totals, the tokens each emission carried) sees it.
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING

from specbench.engine.stats import RequestStats
from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer

if TYPE_CHECKING:
    from specbench.engine.llm_engine import LLMEngine


class _OffByOneStats(RequestStats):
    __slots__ = ()

    def record_round(self, num_drafted: int, num_accepted: int) -> None:
        super().record_round(num_drafted, num_accepted + 1 if num_accepted < num_drafted else num_accepted)


class AcceptedCountOffByOne(Mutant):
    fault = Fault("accepted-count-off-by-one", "a round with a rejection records one more accepted draft than it had "
                  "(outputs untouched)", "", "metrics", Proposer)

    def install(self, engine: LLMEngine) -> None:
        add_request = engine.add_request

        def add_with_bad_stats(*args, **kwargs) -> str:
            request_id = add_request(*args, **kwargs)
            request = engine.committer.requests[request_id]  # a mutant reaches into the engine it corrupts
            request.stats = _OffByOneStats(**{f.name: getattr(request.stats, f.name) for f in fields(RequestStats)})
            return request_id

        engine.add_request = add_with_bad_stats
