"""Grammar-constrained decoding (issue 46): per-request grammar state that follows exactly the committed tokens,
token bitmasks for every verify row, rollback of rejected drafts. Backed by llguidance (the `grammar` extra)."""
