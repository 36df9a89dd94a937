"""Paged attention: metadata built fresh per forward, backends behind one Protocol."""

from specbench.attention.backend import ATTENTION_BACKENDS, AttentionBackend, create_backend
from specbench.attention.metadata import AttentionMetadata, build_metadata

__all__ = ["ATTENTION_BACKENDS", "AttentionBackend", "AttentionMetadata", "build_metadata", "create_backend"]
