"""Tree drafting: the tree of draft tokens, growing it step by step (host reference and device), its graphs and KV."""
