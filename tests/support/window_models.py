"""Tiny sliding-window targets for the engine-vs-HF tests: a Mistral with every layer windowed, and a Qwen2 whose
`layer_types` alternate local and global layers; each with a perturbed draft and a copy without the window (to show
the window changes the greedy output, so a test that ignores it cannot pass)."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.support.tiny_models import build_tiny_model, derive_draft

# name -> (architecture, HF config overrides, config.json fields that turn the window off)
WINDOW_TARGETS = {
    # Window 5: shorter than every prompt (6..33 tokens) and than prompt + k.
    "mistral-w5": ("mistral", dict(num_layers=2, sliding_window=5), {"sliding_window": None}),
    # Window 7: longer than the shortest prompt (6) and shorter than it plus k; local, global, local layers.
    "qwen2-alternating-w7": ("qwen2", dict(num_layers=3, use_sliding_window=True, sliding_window=7,
                                           layer_types=["sliding_attention", "full_attention", "sliding_attention"]),
                             {"use_sliding_window": False, "layer_types": ["full_attention"] * 3}),
}


@dataclass(frozen=True)
class WindowTarget:
    target: Path
    draft: Path
    unwindowed: Path  # the target's weights with every layer full attention
    unwindowed_draft: Path  # the draft's, likewise


def build_window_target(root: Path, name: str) -> WindowTarget:
    arch, overrides, no_window = WINDOW_TARGETS[name]
    overrides = dict(overrides)
    target, draft = root / name, root / f"{name}-draft"
    build_tiny_model(target, arch, num_layers=overrides.pop("num_layers"), seed=0, **overrides)
    derive_draft(target, draft, noise=0.15, seed=1)
    return WindowTarget(target, draft, _without_window(target, no_window), _without_window(draft, no_window))


def _without_window(model_dir: Path, no_window: dict) -> Path:
    out = model_dir.with_name(f"{model_dir.name}-unwindowed")
    shutil.copytree(model_dir, out)
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, **no_window}))
    return out
