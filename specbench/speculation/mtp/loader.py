"""Load the target checkpoint's own MTP module as the `mtp` proposer's head (no --draft: the target ships it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from specbench.errors import SpecbenchError
from specbench.models.fused_kernels import set_policy
from specbench.models.moe_weights import EXPERT_NAMES, per_expert_names
from specbench.models.partial_rotary import permuted_for_rope
from specbench.speculation.eagle.loader import FINAL_HIDDEN
from specbench.speculation.mtp.checkpoint import MtpCheckpoint, read_mtp_checkpoint
from specbench.speculation.mtp.head import MtpHead, mtp_head_config

DUMMY_SEED_OFFSET = 1_000_003  # the dummy module's weights never replay the dummy target's stream


@dataclass(frozen=True)
class LoadedMtpHead:
    head: MtpHead
    checkpoint: MtpCheckpoint | None  # None: a dummy target's random module
    num_modules: int  # modules the target config declares (only 1 is run)
    method: str = "mtp"
    # The target's final normed hidden state, as transformers' MTP generation, vLLM and SGLang feed it.
    feature_layers: tuple[int, ...] = FINAL_HIDDEN

    def describe(self) -> dict[str, object]:
        ckpt = self.checkpoint
        return {
            "method": self.method,
            "dialect": "dummy" if ckpt is None else ckpt.dialect,
            "path": None if ckpt is None else ckpt.path,
            "weights_sha256": None if ckpt is None else ckpt.weights_sha256,
            "num_modules": self.num_modules,
            "module_per_step": "module 0 for every step (k beyond the module count reuses the last)",
            "moe_layer": self.head.config.layer.moe is not None,
            "target_feature": "final post-norm hidden state",
            "chained_hidden": "the module's own output after its final norm",
        }


def load_mtp_head(target, *, attn_backend, dtype: torch.dtype, device: torch.device, allow_pickle: bool,
                  seed: int = 0, fused_kernels: str = "auto") -> LoadedMtpHead:
    """target: specbench.models.loader.LoadedModel (an HF directory with MTP weights, or a dummy target)."""
    tcfg = target.config
    if tcfg.num_mtp_modules > 1:
        raise SpecbenchError(
            f"the target declares {tcfg.num_mtp_modules} MTP modules; specbench runs checkpoints with one "
            "(DeepSeek-V3, GLM-4.5 and Qwen3-Next ship one)"
        )
    head = MtpHead(mtp_head_config(tcfg), attn_backend, dtype, device)
    set_policy(head, fused_kernels)
    if target.info.kind == "dummy":
        if tcfg.num_mtp_modules == 0:
            raise SpecbenchError(f"dummy target {target.info.path!r} has no MTP module (num_mtp_modules 0)")
        head.init_random_weights(seed + DUMMY_SEED_OFFSET)
        checkpoint = None
    elif target.info.kind == "hf_dir" or target.info.kind == "hub":
        checkpoint = read_mtp_checkpoint(Path(target.info.path), tcfg.num_hidden_layers, allow_pickle)
        _fill(head, checkpoint)
    else:
        raise SpecbenchError(f"--method mtp reads the MTP module of an HF checkpoint, not a {target.info.kind} one")
    head.bind_target(target.model.embed_weight, target.model.lm_head_weight)
    return LoadedMtpHead(head, checkpoint, max(tcfg.num_mtp_modules, 1))


@torch.no_grad()
def _fill(head: MtpHead, ckpt: MtpCheckpoint) -> None:
    c = head.config.layer
    targets = head.checkpoint_targets()
    tensors = permuted_for_rope(per_expert_names(ckpt.tensors.items(), EXPERT_NAMES.get(c.architecture)),
                                c.head_dim, c.rotary_dim)
    filled: set[str] = set()
    for name, tensor in tensors:
        file_name = ckpt.file_names.get(name, name)
        if name not in targets:
            raise SpecbenchError(f"unexpected MTP weight {file_name!r} in {ckpt.path} ({ckpt.dialect} dialect)")
        param, start, end = targets[name]
        if param[start:end].shape != tensor.shape:
            raise SpecbenchError(f"MTP weight {file_name!r} has shape {tuple(tensor.shape)}, the module expects "
                                 f"{tuple(param[start:end].shape)}")
        param[start:end].copy_(tensor)
        filled.add(name)
    missing = sorted(targets.keys() - filled)
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise SpecbenchError(f"{ckpt.path}: the {ckpt.dialect} MTP module lacks {missing[0]!r}{more}")
