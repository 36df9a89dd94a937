"""The target features an EAGLE head consumes, recomputed from committed tokens by one cache-free target forward.

The engine captures them while verifying (paged KV, batched rows, sliced per request); the oracle takes none of
that on trust: feature p is what the target computes at position p of the committed sequence, alone.
"""

from __future__ import annotations

import torch

from specbench.check.fresh_forward import fresh_sequence
from specbench.speculation.drafters.eagle.loader import FINAL_HIDDEN


@torch.inference_mode()
def recompute_target_features(target_model, feature_layers: tuple[int, ...], token_ids: tuple[int, ...],
                              block_size: int, device: torch.device | str) -> torch.Tensor:
    """[len(token_ids), feature_dim] float32 host features: EAGLE-1 (FINAL_HIDDEN) the final normed hidden state,
    EAGLE-3 the concatenated HF hidden_states[i] for i in feature_layers."""
    md, kv = fresh_sequence(target_model.kv_cache_spec(), len(token_ids), block_size, device)
    ids = torch.tensor(token_ids, dtype=torch.int64, device=device)
    aux = () if feature_layers == FINAL_HIDDEN else feature_layers
    out = target_model(ids, md, kv, aux_layer_ids=aux, phase="oracle")
    features = out.hidden_states if feature_layers == FINAL_HIDDEN else out.aux_hidden_states
    return features.float().cpu()


class TargetFeatureCache:
    """Per request, the features of the longest committed sequence seen (causal: a prefix's features are a prefix
    of them); a sequence that is not an extension of it is recomputed on its own."""

    def __init__(self, target_model, feature_layers: tuple[int, ...], block_size: int,
                 device: torch.device | str) -> None:
        self._args = (target_model, feature_layers)
        self._block_size, self._device = block_size, device
        self._known: dict[str, tuple[tuple[int, ...], torch.Tensor]] = {}  # request -> (tokens, [n, F] features)

    def prime(self, request_id: str, token_ids: tuple[int, ...]) -> None:
        """Compute once for the request's longest sequence before asking for its prefixes."""
        self._known[request_id] = (token_ids, self._compute(token_ids))

    def features(self, request_id: str, token_ids: tuple[int, ...]) -> torch.Tensor:  # [len(token_ids), F]
        known = self._known.get(request_id)
        if known is not None and known[0][: len(token_ids)] == token_ids:
            return known[1][: len(token_ids)]
        return self._compute(token_ids)

    def _compute(self, token_ids: tuple[int, ...]) -> torch.Tensor:
        return recompute_target_features(*self._args, token_ids, self._block_size, self._device)
