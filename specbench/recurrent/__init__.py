"""Recurrent-state layers of hybrid targets (Gated DeltaNet): the state rule, the layer, the per-request state slots."""
