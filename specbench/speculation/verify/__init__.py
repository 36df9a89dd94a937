"""Verification of drafts against the target: chains (torch reference and Triton) and trees (walk and batched)."""
