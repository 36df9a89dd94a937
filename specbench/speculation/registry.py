"""Registry of proposers. `none` has no proposer object: the engine decodes plainly."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from specbench.config import EngineConfig
from specbench.registry import Registry
from specbench.runtime.hooks import NO_HOOKS, PhaseHooks
from specbench.speculation.proposer import Proposer

if TYPE_CHECKING:
    from specbench.attention.backend import AttentionBackend
    from specbench.models.loader import LoadedModel


@dataclass(frozen=True)
class ProposerContext:
    config: EngineConfig
    target: LoadedModel
    attn_backend: AttentionBackend
    dtype: torch.dtype
    device: torch.device
    hooks: PhaseHooks = NO_HOOKS  # what the proposer calls while it builds each draft phase's input


PROPOSERS: Registry[Proposer | None] = Registry("speculative method")


@PROPOSERS.register("none")
def _none(ctx: ProposerContext) -> None:
    return None


@PROPOSERS.register("ngram")
def _ngram(ctx: ProposerContext) -> Proposer:
    from specbench.speculation.ngram import NgramProposer

    return NgramProposer(ctx.config.ngram_min, ctx.config.ngram_max, ctx.device)


@PROPOSERS.register("draft")
def _draft(ctx: ProposerContext) -> Proposer:
    from specbench.speculation.draft_model import load_draft_proposer

    return load_draft_proposer(ctx)


@PROPOSERS.register("eagle")
def _eagle(ctx: ProposerContext) -> Proposer:
    from specbench.speculation.eagle.proposer import load_eagle_proposer

    return load_eagle_proposer(ctx, "eagle")


@PROPOSERS.register("eagle3")
def _eagle3(ctx: ProposerContext) -> Proposer:
    from specbench.speculation.eagle.proposer import load_eagle_proposer

    return load_eagle_proposer(ctx, "eagle3")


@PROPOSERS.register("mtp")
def _mtp(ctx: ProposerContext) -> Proposer:
    from specbench.speculation.mtp.proposer import load_mtp_proposer

    return load_mtp_proposer(ctx)


def create_proposer(ctx: ProposerContext) -> Proposer | None:
    return PROPOSERS.create(ctx.config.method, ctx)
