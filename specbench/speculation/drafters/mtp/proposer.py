"""The `mtp` proposer: the EAGLE-1 machinery (catch-up over the target's final hidden states, own paged KV,
argmax draft steps, round graphs, drafting ahead) around the target checkpoint's MTP module (head.py); several
modules chain as DeepSeek-V3 does (multi_module.py)."""

from __future__ import annotations

from specbench.speculation.drafters.eagle.proposer import EagleProposer


class MtpProposer(EagleProposer):
    """EagleProposer's capabilities, with the head loaded from the target checkpoint; its own class so that what
    only MTP hosts (the MTP module's inputs) is asked of this class."""


def load_mtp_proposer(ctx) -> MtpProposer:
    from specbench.errors import SpecbenchError
    from specbench.speculation.drafters.mtp.loader import load_mtp_head

    cfg = ctx.config
    if cfg.draft:
        raise SpecbenchError("method 'mtp' drafts with the target checkpoint's own MTP module; drop --draft")
    loaded = load_mtp_head(ctx.target, attn_backend=ctx.attn_backend, dtype=ctx.dtype, device=ctx.device,
                           allow_pickle=cfg.allow_pickle, seed=cfg.seed, fused_kernels=cfg.fused_kernels)
    if loaded.num_modules > 1:
        from specbench.speculation.drafters.mtp.multi_module import MultiModuleMtpProposer

        return MultiModuleMtpProposer(loaded, cfg.block_size, ctx.device, ctx.hooks,
                                      debug_invariants=cfg.debug_invariants)
    return MtpProposer(loaded, cfg.block_size, ctx.device, ctx.hooks, debug_invariants=cfg.debug_invariants)
