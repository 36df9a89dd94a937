"""Load an EAGLE head for a target: read, detect the dialect, resolve aux layers, validate, build."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.errors import SpecbenchError
from specbench.models.fused_kernels import set_policy
from specbench.speculation.drafters.eagle.aux_layers import AUTO, AuxLayerResolution, resolve_aux_layers
from specbench.speculation.drafters.eagle.checkpoint import EagleCheckpoint, read_checkpoint
from specbench.speculation.drafters.eagle.head import EagleHead, HeadShape
from specbench.speculation.drafters.eagle.validate import check_config, check_weights, vocab_mapping

FINAL_HIDDEN = (-1,)  # the target runner's code for its final post-norm hidden state


@dataclass(frozen=True)
class LoadedEagleHead:
    head: EagleHead
    checkpoint: EagleCheckpoint  # tensors already copied into the head
    aux: AuxLayerResolution | None  # EAGLE-3 only
    feature_layers: tuple[int, ...]  # what the target captures for the head: FINAL_HIDDEN or HF indices

    @property
    def method(self) -> str:  # the proposer's name: "eagle" | "eagle3"
        return self.checkpoint.config.method

    def describe(self) -> dict[str, object]:
        cfg, head = self.checkpoint.config, self.head
        return {
            "method": cfg.method,
            "dialect": cfg.dialect,
            "dialect_reason": cfg.dialect_reason,
            "path": self.checkpoint.path,
            "weight_files": list(self.checkpoint.weight_files),
            "weights_sha256": self.checkpoint.weights_sha256,
            "num_layers": cfg.num_layers,
            "hidden_size": cfg.hidden_size,
            "rope_theta": cfg.layer.rope_theta,
            "fc_in_features": head.shape.fc_in_features,
            "fc_bias": cfg.fc_bias,
            "norm_before_residual": cfg.norm_before_residual if cfg.method == "eagle3" else None,
            "norm_output": cfg.norm_output,
            "embedding": "own" if head.shape.has_own_embed else "target",
            "lm_head": "own" if head.shape.has_own_lm_head else "target",
            "vocab_mapping": {
                "draft_vocab_size": cfg.draft_vocab_size,
                "target_vocab_size": cfg.vocab_size,
                "mapped": head.draft_to_target is not None,
            },
            "target_feature": "final post-norm hidden state" if self.aux is None else "aux hidden states (pre-norm)",
            "aux_layers": None if self.aux is None else self.aux.describe(),
        }


def load_eagle_head(
    source: str,
    *,
    method: str,
    target,  # specbench.models.loader.LoadedModel
    aux_override: tuple[int, ...] | None,
    aux_convention: str,
    attn_backend,
    dtype: torch.dtype,
    device: torch.device,
    allow_pickle: bool,
    fused_kernels: str = "auto",  # the head's fused-kernel policy (EngineConfig.fused_kernels)
) -> LoadedEagleHead:
    ckpt = read_checkpoint(source, allow_pickle=allow_pickle)
    cfg = ckpt.config
    if cfg.method != method:
        kind = "EAGLE-3" if cfg.method == "eagle3" else "EAGLE-1"
        raise SpecbenchError(f"{source} is an {kind} head ({cfg.dialect_reason}); run it with --method {cfg.method}")
    if method == "eagle" and (aux_override is not None or aux_convention != AUTO):
        raise SpecbenchError("--eagle-aux-layer-ids / --eagle-aux-convention apply to --method eagle3 only")
    tcfg = target.config
    check_config(ckpt, tcfg)
    aux = None
    if cfg.method == "eagle3":
        aux = resolve_aux_layers(cfg.aux, aux_override, aux_convention, tcfg.num_hidden_layers)
        fc_in = len(aux.hf_indices) * tcfg.hidden_size
    else:
        fc_in = cfg.hidden_size + tcfg.hidden_size
    shape = HeadShape(
        config=cfg,
        fc_in_features=fc_in,
        has_own_embed="embed_tokens.weight" in ckpt.tensors,
        has_own_lm_head=cfg.method == "eagle3" and "lm_head.weight" in ckpt.tensors,
    )
    head = EagleHead(shape, attn_backend, dtype, device)
    set_policy(head, fused_kernels)
    targets = head.checkpoint_targets()
    expected = {name: (end - start, *param.shape[1:]) for name, (param, start, end) in targets.items()}
    check_weights(ckpt, expected, _shape_hints(shape, aux))
    with torch.no_grad():
        for name, (param, start, end) in targets.items():
            param[start:end].copy_(ckpt.tensors[name])
    if cfg.method == "eagle3":
        mapping = vocab_mapping(ckpt)
        head.draft_to_target = None if mapping is None else mapping.to(device)
    head.bind_target(target.model.embed_weight, target.model.lm_head_weight)
    feature_layers = FINAL_HIDDEN if aux is None else aux.hf_indices
    return LoadedEagleHead(head, ckpt, aux, feature_layers)


def _shape_hints(shape: HeadShape, aux: AuxLayerResolution | None) -> dict[str, str]:
    cfg = shape.config
    h, ht = cfg.hidden_size, cfg.target_hidden_size
    if aux is None:
        fc = f"input width = embedding {h} + target hidden {ht}; output = hidden_size {h}"
    else:
        fc = (f"input width = {len(aux.hf_indices)} aux layers {list(aux.hf_indices)} x target hidden {ht}; "
              f"output = hidden_size {h}")
    hints = {"fc.weight": fc, "embed_tokens.weight": f"[vocab_size {cfg.vocab_size}, hidden_size {h}]"}
    if cfg.method == "eagle3":
        hints["lm_head.weight"] = f"[draft_vocab_size {cfg.draft_vocab_size}, hidden_size {h}]"
        wide = f"the first EAGLE-3 layer reads [embedding, hidden], {2 * h} wide"
        for proj in ("q_proj", "k_proj", "v_proj"):
            hints[f"layers.0.self_attn.{proj}.weight"] = wide
    return hints
