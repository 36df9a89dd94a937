"""Load the target checkpoint's own MTP module as the `mtp` proposer's head, and the proposer around it (no --draft:
the target ships it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from specbench.errors import SpecbenchError
from specbench.models.fused_kernels import set_policy
from specbench.models.moe_weights import EXPERT_NAMES, per_expert_names
from specbench.models.partial_rotary import permuted_for_rope
from specbench.speculation.drafters.eagle.loader import FINAL_HIDDEN
from specbench.speculation.drafters.mtp.checkpoint import LAYER_INDEX, MtpCheckpoint, read_mtp_checkpoint
from specbench.speculation.drafters.mtp.head import MtpHead, mtp_head_config
from specbench.speculation.drafters.mtp.multi_module import MultiModuleMtpProposer
from specbench.speculation.drafters.mtp.proposer import MtpProposer

DUMMY_SEED_OFFSET = 1_000_003  # the dummy module's weights never replay the dummy target's stream


@dataclass(frozen=True)
class LoadedMtpHead:
    head: MtpHead  # module 0 (the catch-up's and draft step 0's)
    checkpoint: MtpCheckpoint | None  # module 0's; None: a dummy target's random module
    num_modules: int  # modules the target config declares, all run (speculation/drafters/mtp/multi_module.py)
    modules: tuple[MtpHead, ...] = ()  # [num_modules] module i at index i (modules[0] is head); () = (head,)
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
            "module_per_step": ("module 0 for every step" if self.num_modules == 1 else
                                "step i runs module min(i, num_modules - 1) (k beyond the module count reuses the "
                                "last)"),
            "moe_layer": self.head.config.layer.moe is not None,
            "target_feature": "final post-norm hidden state",
            "chained_hidden": "the module's own output after its final norm",
        }


def load_mtp_head(target, *, attn_backend, dtype: torch.dtype, device: torch.device, allow_pickle: bool,
                  seed: int = 0, fused_kernels: str = "auto") -> LoadedMtpHead:
    """target: specbench.models.loader.LoadedModel (an HF directory with MTP weights, or a dummy target)."""
    tcfg = target.config
    num_modules = max(tcfg.num_mtp_modules, 1)
    config = mtp_head_config(tcfg, num_modules)
    modules = tuple(MtpHead(config, attn_backend, dtype, device, module_index=i) for i in range(num_modules))
    for module in modules:
        set_policy(module, fused_kernels)
    if target.info.kind == "dummy":
        if tcfg.num_mtp_modules == 0:
            raise SpecbenchError(f"dummy target {target.info.path!r} has no MTP module (num_mtp_modules 0)")
        for i, module in enumerate(modules):
            module.init_random_weights(seed + DUMMY_SEED_OFFSET + i)
        checkpoint = None
    elif target.info.kind == "hf_dir" or target.info.kind == "hub":
        checkpoints = [read_mtp_checkpoint(Path(target.info.path), tcfg.num_hidden_layers, allow_pickle, module=i)
                       for i in range(num_modules)]
        checkpoint = checkpoints[0]
        if num_modules > 1 and checkpoint.dialect != LAYER_INDEX:
            # Qwen3-Next's mtp_num_hidden_layers stacks decoder layers inside its one module (one fc, one norm)
            raise SpecbenchError(
                f"the target declares {num_modules} MTP layers in the {checkpoint.dialect} dialect; specbench runs "
                "several MTP modules in the layer-index dialect only (DeepSeek-V3's num_nextn_predict_layers)")
        for module, ckpt in zip(modules, checkpoints):
            _fill(module, ckpt)
    else:
        raise SpecbenchError(f"--method mtp reads the MTP module of an HF checkpoint, not a {target.info.kind} one")
    for module in modules:
        module.bind_target(target.model.embed_weight, target.model.lm_head_weight)
    return LoadedMtpHead(modules[0], checkpoint, num_modules, modules)


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
        raise SpecbenchError(f"{ckpt.path}: the {ckpt.dialect} MTP module {ckpt.module} lacks {missing[0]!r}{more}")


def load_mtp_proposer(ctx) -> MtpProposer:
    """The `mtp` proposer of a ProposerContext (speculation/registry.py): one module, or several chained."""
    cfg = ctx.config
    if cfg.draft:
        raise SpecbenchError("method 'mtp' drafts with the target checkpoint's own MTP module; drop --draft")
    loaded = load_mtp_head(ctx.target, attn_backend=ctx.attn_backend, dtype=ctx.dtype, device=ctx.device,
                           allow_pickle=cfg.allow_pickle, seed=cfg.seed, fused_kernels=cfg.fused_kernels)
    if loaded.num_modules > 1:
        return MultiModuleMtpProposer(loaded, cfg.block_size, ctx.device, ctx.hooks,
                                      debug_invariants=cfg.debug_invariants)
    return MtpProposer(loaded, cfg.block_size, ctx.device, ctx.hooks, debug_invariants=cfg.debug_invariants)
