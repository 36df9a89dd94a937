"""Chunked prefill: a final chunk's first token is sampled from the row before its last prompt row (the logits
index of the chunk off by one; with a one-token final chunk, the previous segment's last row). The request's first
token, and every token after it, follow the wrong prediction. Inert without --enable-chunked-prefill. Caught by greedy
identity against the whole-prompt reference (the selftest's chunked rows).
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class ChunkLogitsRowShifted(Mutant):
    fault = Fault("chunk-logits-row-shifted", "a final prompt chunk samples its first token one row early (chunked "
                  "prefill)", "", "target", Proposer)

    def chunk_logits_row(self, request_id: str, last_row: int) -> int:
        return max(0, last_row - 1)
