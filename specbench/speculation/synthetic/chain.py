"""Synthetic acceptance: force per-position acceptance rates (performance work without real weights).

Given unconditional per-position rates p_1 >= p_2 >= ... (e.g. 0.73, 0.52, 0.35, the published
Llama-3.1-8B + EAGLE-3 MT-Bench rates at k = 3), draft i is accepted with probability
p_i / p_{i-1} given that draft i-1 was (p_0 = 1), so rounds accept position i at rate p_i. The
accepted tokens are whatever the drafter proposed and the next token is the target's argmax at
the stop row: the cost of every phase is real, the output is NOT lossless.
"""

from __future__ import annotations

import torch

from specbench.device_copy import tensor_to_device
from specbench.speculation.verify.chain import PLACEHOLDER_TOKEN_ID, VerifyResult, rows_per_request


def conditional_rates(rates: tuple[float, ...]) -> tuple[float, ...]:
    previous = (1.0,) + rates[:-1]
    return tuple(r / p if p > 0 else 0.0 for r, p in zip(rates, previous))


def synthetic_verify(
    target_logits: torch.Tensor,  # [num_tokens, V], rows per request as for `verify`
    draft_token_ids: torch.Tensor,  # [num_reqs, max_num_draft], padded with -1
    num_draft_tokens: torch.Tensor,  # [num_reqs] int64 (host or device)
    conditional: torch.Tensor,  # [>= max_num_draft] float32 on the logits' device
    generator: torch.Generator | None = None,
) -> VerifyResult:
    num_reqs, max_num_draft = draft_token_ids.shape
    device = target_logits.device
    num_draft = tensor_to_device(num_draft_tokens, device, torch.int64)
    positions = torch.arange(max_num_draft + 1, device=device)
    logits = rows_per_request(target_logits, num_draft, positions)  # [num_reqs, K + 1, V]
    coins = torch.rand(num_reqs, max_num_draft, device=device, generator=generator)
    is_accepted = (coins < conditional[None, :max_num_draft]) & (positions[None, :max_num_draft] < num_draft[:, None])
    num_accepted = is_accepted.long().cumprod(dim=1).sum(dim=1)  # [num_reqs]
    final = logits.argmax(dim=-1).gather(1, num_accepted[:, None])  # [num_reqs, 1]
    drafts = torch.nn.functional.pad(draft_token_ids.to(device), (0, 1), value=PLACEHOLDER_TOKEN_ID)
    output = torch.where(positions[None, :] < num_accepted[:, None], drafts, PLACEHOLDER_TOKEN_ID)
    output = output.scatter(1, num_accepted[:, None], final)
    return VerifyResult(output_token_ids=output, num_accepted=num_accepted)
