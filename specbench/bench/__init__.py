"""Benchmark sweeps: a grid of cells on one engine, every number to parquet (schema: runs/schema.py)."""
