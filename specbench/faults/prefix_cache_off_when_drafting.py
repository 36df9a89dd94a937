"""With speculation on (k > 0), nothing is registered in the prefix cache, so nothing ever hits it; with k = 0 it caches
as it should (vLLM #54360: prefix-cache hits 0 for hybrid models with speculation on). Outputs stay exact: only the
hit rate with speculation on against off shows it (`specbench stress`: NO-CACHE-HITS at the cache conditions)."""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class PrefixCacheOffWhenDrafting(Mutant):
    fault = Fault("prefix-cache-off-when-drafting", "with speculation on, nothing is registered in the prefix cache "
                  "(hits 0; vLLM #54360)", "", "stress", Proposer,
                  caught_by="`specbench stress` (NO-CACHE-HITS at warm-cache and multi-turn)")

    def __init__(self) -> None:
        self._engine = None  # the engine it bends: its k now (the stress stage changes k on one embedded engine)

    def install(self, engine) -> None:
        self._engine = engine

    def cacheable_tokens(self, request_id: str, num_final: int, num_tokens: int) -> int:
        return 0 if self._engine is not None and self._engine.num_steps > 0 else num_final
