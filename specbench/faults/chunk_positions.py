"""Chunked prefill: every prompt chunk after a request's first is fed one position early, as if the previous chunk
had counted one token too many (the class of vLLM #30618, where drafts were counted as prompt and the next chunk's
positions slid). Its K/V overwrite the previous chunk's last position and leave the chunk's own last position
unwritten: the request's later tokens read wrong keys. Inert without --enable-chunked-prefill (no chunks) and on
prompts that fit one chunk. Caught by greedy identity against the whole-prompt reference (the selftest's chunked rows).
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class ChunkPositionsShifted(Mutant):
    fault = Fault("chunk-positions-shifted", "a prompt chunk after the first is fed one position early (chunked "
                  "prefill)", "vLLM #30618 (drafts counted as prompt)", "target", Proposer)

    def chunk_positions(self, request_id: str, start: int, num_tokens: int) -> list[int]:
        first = start - 1 if start > 0 else start
        return list(range(first, first + num_tokens))
