"""decode.overlap: the lookahead step is fed the tokens of the step before last (seed class: stale state reused).

Overlapped plain decoding launches step N + 1 with step N's sampled tokens still on the device as its input. Here
the launch keeps an older device buffer: step N + 1 reads step N - 1's tokens, so each request repeats a token
the host already emitted and every later position is computed on the wrong history.
"""

from __future__ import annotations

import torch

from specbench.faults.fault import Fault
from specbench.faults.path_mutant import PathMutant, wrap_method


class OverlapStaleInput(PathMutant):
    fault = Fault("overlap-stale-input", "an overlapped plain decode step is fed the tokens of the step before last",
                  "002 (stale state reused)", "target", None, path="decode.overlap", is_plain_hosted=True)

    def __init__(self) -> None:
        self._launched: list[torch.Tensor] = []  # [num_reqs] next-token column of the last two launches, oldest first

    def install(self, engine) -> None:
        def make(launch):
            def stale_launch(batch, start, newest_token_ids):
                fed = newest_token_ids
                if newest_token_ids is None:  # a synchronous launch starts a new chain of lookahead steps
                    self._launched.clear()
                elif len(self._launched) == 2 and self._launched[0].shape == newest_token_ids.shape:
                    fed = self._launched[0]
                step = launch(batch, start, fed)
                self._launched = [*self._launched[-1:], step.launch.output_token_ids[:, 0]]
                return step
            return stale_launch

        wrap_method(engine.loop, "_launch_plain_decode", make)
