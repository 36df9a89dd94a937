"""decode.overlap: the lookahead step is fed the tokens of the step before last (seed class: stale state reused).

Overlapped plain decoding launches step N + 1 with step N's sampled tokens still on the device as its input. Here
the launch keeps an older device buffer: step N + 1 reads step N - 1's tokens, so each request repeats a token
the host already emitted and every later position is computed on the wrong history.
"""

from __future__ import annotations

import torch

from specbench.faults.fault import Fault
from specbench.faults.path_mutant import PathMutant


class OverlapStaleInput(PathMutant):
    fault = Fault("overlap-stale-input", "an overlapped plain decode step is fed the tokens of the step before last",
                  "002 (stale state reused)", "target", None, path="decode.overlap", is_plain_hosted=True)

    def __init__(self) -> None:
        # [num_reqs] the tokens the last lookahead launch was really fed: the output of the step before the one in
        # flight, which is what the next launch gets instead of the newest
        self._fed: torch.Tensor | None = None

    def plain_decode_launch(self, requests, newest_token_ids: torch.Tensor | None) -> torch.Tensor | None:
        if newest_token_ids is None:  # a synchronous launch starts a new chain of lookahead steps
            self._fed = None
            return None
        stale, self._fed = self._fed, newest_token_ids
        return stale if stale is not None and stale.shape == newest_token_ids.shape else newest_token_ids
