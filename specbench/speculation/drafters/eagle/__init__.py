"""EAGLE-1 / EAGLE-3 drafters: checkpoint dialects, aux-layer resolution, heads and the proposer."""
