"""The MTP module is fed the target's hidden state of the previous position.

At position p the module must read (the token at p + 1, the target's hidden at p); this mutant hands each catch-up
row the hidden of p - 1 (a request's first row keeps its own). Positions, metadata and the module's KV stay
consistent, and greedy output is the target's whatever the drafts are; only a check that recomputes the module's
input from the committed tokens (the draft oracle) or watches acceptance sees it.
"""

from __future__ import annotations

import torch

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.drafters.mtp.proposer import MtpProposer


class MtpHiddenWrongPosition(Mutant):
    fault = Fault("mtp-hidden-wrong-position", "MTP module fed the target hidden state of the previous position",
                  "", "draft", MtpProposer)

    def extend_hidden(self, request_ids: tuple[str, ...], hidden: torch.Tensor,
                      last_rows: torch.Tensor) -> torch.Tensor:
        """hidden [num_tokens, H] in request order; last_rows [num_reqs] each request's last row."""
        shifted = torch.cat([hidden[:1], hidden[:-1]])  # row i gets row i - 1
        first_rows = torch.cat([last_rows.new_zeros(1), last_rows[:-1] + 1])  # [num_reqs] each request's first row
        shifted[first_rows] = hidden[first_rows]
        return shifted
