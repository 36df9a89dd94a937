"""Workloads (mapped to specbench.workloads)."""
