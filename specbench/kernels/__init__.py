"""Triton kernels (mapped to specbench.kernels; never import as top-level `kernels`)."""
