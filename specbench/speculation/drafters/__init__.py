"""The drafters: n-gram lookup, a draft LM, EAGLE-1/3 heads and MTP modules (each a `Proposer`: capabilities.py)."""
