"""Synthetic acceptance: forced acceptance rates for chains and trees (performance work, not lossless)."""
