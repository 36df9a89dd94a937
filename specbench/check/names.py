"""The battery's check names, in table order (a light import for CLI option defaults)."""

CHECKS = ("greedy", "sampled", "rows", "oracle", "invariants", "baseline", "metrics")
