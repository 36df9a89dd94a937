"""The reasoning boundary: a request whose grammar starts after a marker ("</think>") is unconstrained until the
marker's token ids appear among its tokens, drafted or committed; rollback may reopen it."""

from __future__ import annotations


class ReasoningGate:
    def __init__(self, marker_token_ids: tuple[int, ...]) -> None:
        self.marker_token_ids = marker_token_ids  # empty: no reasoning section, the grammar starts at once
        self.reasoning_token_ids: list[int] = []  # tokens seen while open, to match the marker across them
        self.is_open = bool(marker_token_ids)

    def consume(self, token_id: int) -> bool:
        """Take one token of the reasoning section; True when it completes the marker (the grammar starts next)."""
        self.reasoning_token_ids.append(token_id)
        width = len(self.marker_token_ids)
        if tuple(self.reasoning_token_ids[-width:]) == self.marker_token_ids:
            self.is_open = False
            return True
        return False

    def unconsume(self, closed_it: bool) -> None:
        """Undo the newest reasoning token; `closed_it`: that token completed the marker."""
        self.reasoning_token_ids.pop()
        if closed_it:
            self.is_open = True
