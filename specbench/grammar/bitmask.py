"""Token bitmasks on logits, in torch: llguidance's packed rows (bit j of word w allows token 32 w + j)."""

from __future__ import annotations

import torch

_SHIFTS = torch.arange(32, dtype=torch.int32)  # [32]


def apply_token_bitmask(logits: torch.Tensor, bitmask: torch.Tensor) -> torch.Tensor:
    """logits [num_rows, vocab] with disallowed tokens at -inf; bitmask [num_rows, ceil(vocab / 32)] int32 (host or
    device). A new tensor: the raw logits stay readable (logprobs are reported unmasked, as the model produced them)."""
    num_rows, vocab_size = logits.shape
    words = bitmask.to(logits.device, non_blocking=True)
    bits = (words[:, :, None] >> _SHIFTS.to(logits.device)) & 1  # [num_rows, num_words, 32]
    is_allowed = bits.reshape(num_rows, -1)[:, :vocab_size].bool()  # [num_rows, vocab]
    return logits.masked_fill(~is_allowed, float("-inf"))


def num_words(vocab_size: int) -> int:
    return (vocab_size + 31) // 32
