"""Strict load-time checks of an EAGLE head against its target: widths, key sets, vocabulary mapping.

Each problem raises one SpecbenchError naming the config field or the weight key as the checkpoint spells it.
"""

from __future__ import annotations

import torch

from specbench.errors import SpecbenchError
from specbench.models.config import ModelConfig
from specbench.speculation.drafters.eagle.checkpoint import EagleCheckpoint
from specbench.speculation.drafters.eagle.config import EAGLE1

_MAPPING_KEYS = ("d2t", "t2d")


def check_config(ckpt: EagleCheckpoint, target: ModelConfig) -> None:
    cfg = ckpt.config
    if cfg.vocab_size != target.vocab_size:
        raise SpecbenchError(
            f"EAGLE head config vocab_size {cfg.vocab_size} != the target's vocabulary {target.vocab_size}: "
            "the head was built for another target"
        )
    if cfg.target_hidden_size != target.hidden_size:
        raise SpecbenchError(
            f"EAGLE head config target_hidden_size/hidden_size gives target features of width "
            f"{cfg.target_hidden_size}, but the target's hidden_size is {target.hidden_size}"
        )
    if cfg.dialect == EAGLE1 and cfg.hidden_size != target.hidden_size:
        raise SpecbenchError(
            f"EAGLE-1 head config hidden_size {cfg.hidden_size} != the target's hidden_size {target.hidden_size} "
            "(an EAGLE-1 head reads the target's lm_head)"
        )
    if cfg.draft_vocab_size > cfg.vocab_size or cfg.draft_vocab_size < 1:
        raise SpecbenchError(
            f"EAGLE head draft vocabulary ({cfg.draft_vocab_size} ids, config draft_vocab_size) must be within the "
            f"target vocabulary ({cfg.vocab_size} ids, config vocab_size)"
        )
    if cfg.method == "eagle3" and "lm_head.weight" not in ckpt.tensors:
        if cfg.draft_vocab_size != cfg.vocab_size or cfg.hidden_size != target.hidden_size:
            raise SpecbenchError(
                f"EAGLE-3 head is missing weight {ckpt.file_name('lm_head.weight')!r} and cannot share the "
                "target's (its draft vocabulary or hidden size differs)"
            )
    if cfg.hidden_size != target.hidden_size and "embed_tokens.weight" not in ckpt.tensors:
        raise SpecbenchError(
            f"EAGLE head hidden_size {cfg.hidden_size} differs from the target's {target.hidden_size}, so it must "
            f"ship its own {ckpt.file_name('embed_tokens.weight')!r}, which is missing"
        )


def check_weights(ckpt: EagleCheckpoint, expected: dict[str, tuple[int, ...]], hints: dict[str, str]) -> None:
    """Exactly the expected keys (plus d2t/t2d for EAGLE-3), each with its expected shape."""
    allowed_extra = _MAPPING_KEYS if ckpt.config.method == "eagle3" else ()
    for name in ckpt.tensors:
        if name not in expected and name not in allowed_extra:
            raise SpecbenchError(
                f"unexpected weight {ckpt.file_name(name)!r} in {ckpt.config.dialect} head {ckpt.path} "
                f"({ckpt.config.num_layers} layer(s), fc bias {ckpt.config.fc_bias})"
            )
    for name in expected:
        if name not in ckpt.tensors:
            raise SpecbenchError(f"{ckpt.config.dialect} head {ckpt.path} is missing weight {ckpt.file_name(name)!r}")
    for name, shape in expected.items():
        got = tuple(ckpt.tensors[name].shape)
        if got != shape:
            hint = f" ({hints[name]})" if name in hints else ""
            raise SpecbenchError(
                f"weight {ckpt.file_name(name)!r} has shape {got}, expected {shape}{hint}"
            )


def vocab_mapping(ckpt: EagleCheckpoint) -> torch.Tensor | None:
    """[draft_vocab] int64 target id of each draft id, or None when the draft vocabulary is the target's."""
    cfg = ckpt.config
    d2t, t2d = ckpt.tensors.get("d2t"), ckpt.tensors.get("t2d")
    vocab, draft_vocab = cfg.vocab_size, cfg.draft_vocab_size
    if d2t is None:
        if draft_vocab < vocab:
            raise SpecbenchError(
                f"EAGLE-3 head has draft_vocab_size {draft_vocab} < vocab_size {vocab} but no 'd2t' mapping"
            )
        target_ids = torch.arange(vocab)
    else:
        if tuple(d2t.shape) != (draft_vocab,) or d2t.is_floating_point() or d2t.dtype == torch.bool:
            raise SpecbenchError(
                f"'d2t' must be an integer tensor of shape ({draft_vocab},), got {d2t.dtype} {tuple(d2t.shape)}"
            )
        target_ids = d2t.long() + torch.arange(draft_vocab)  # d2t stores offsets
        bad = ((target_ids < 0) | (target_ids >= vocab)).nonzero()
        if len(bad):
            i = int(bad[0])
            raise SpecbenchError(
                f"'d2t' maps draft id {i} to target id {int(target_ids[i])}, outside the target vocabulary "
                f"[0, {vocab}) (draft vocabulary {draft_vocab} ids, target vocabulary {vocab} ids)"
            )
        if len(torch.unique(target_ids)) != draft_vocab:
            raise SpecbenchError("'d2t' maps two draft ids to the same target id")
    if t2d is not None:
        if tuple(t2d.shape) != (vocab,):
            raise SpecbenchError(f"'t2d' must have shape ({vocab},), got {tuple(t2d.shape)}")
        is_draft = t2d.bool()
        if int(is_draft.sum()) != draft_vocab or not bool(is_draft[target_ids].all()):
            raise SpecbenchError("'t2d' does not mark exactly the target ids that 'd2t' maps to")
    if draft_vocab == vocab and torch.equal(target_ids, torch.arange(vocab)):
        return None
    return target_ids
