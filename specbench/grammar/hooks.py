"""The hooks the grammar book calls (a test harness's seam, runtime/hooks.py PhaseHooks implements them): declared
here so that this layer, below the runtime, names no class above it."""

from __future__ import annotations

from typing import Protocol

import torch


class GrammarHooks(Protocol):
    def grammar_mask_rows(self, num_rows_per_request: list[int], bitmask: torch.Tensor) -> torch.Tensor: ...

    def grammar_tree_mask_rows(self, parents: list[list[int]], bitmask: torch.Tensor) -> torch.Tensor: ...

    def grammar_bonus_logits(self, masked: torch.Tensor, raw: torch.Tensor,
                             num_rows_per_request: list[int]) -> torch.Tensor: ...

    def grammar_rollback(self, request_id: str, num_walked: int, num_accepted: int) -> int: ...

    def grammar_replay(self, request_id: str, token_ids: tuple[int, ...]) -> tuple[int, ...]: ...

    def grammar_masks_after_drafted_marker(self) -> bool: ...
