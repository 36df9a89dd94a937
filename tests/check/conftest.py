"""The selftest's tiny models with the tiny BPE tokenizer, for CLI runs that need text prompts (check, gsm8k)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class SensitivePair:
    target: Path
    draft: Path  # draft LM: the target's weights perturbed
    eagle3: Path  # EAGLE-3 head built from the target's weights (its drafts depend on the target features)


def build_sensitive_pair(root: Path, seed: int) -> SensitivePair:
    """Positional attention heads make every draft-side fault cost acceptance (specbench/selftest/tiny.py)."""
    from tests.support.tiny_models import VOCAB_SIZE, load_tiny_tokenizer

    from specbench.selftest.tiny import build_tiny_pair
    from specbench.selftest.tiny_eagle import build_tiny_eagle_head

    target, draft = build_tiny_pair(root, seed=seed, vocab_size=VOCAB_SIZE)
    tok = load_tiny_tokenizer()
    for path in (target, draft):
        tok.save_pretrained(path)
    return SensitivePair(Path(target), Path(draft), Path(build_tiny_eagle_head(target, root / "eagle3")))


@pytest.fixture(scope="session")
def sensitive_pairs(tmp_path_factory):
    """seed -> SensitivePair, built once per session."""
    built: dict[int, SensitivePair] = {}

    def get(seed: int) -> SensitivePair:
        if seed not in built:
            built[seed] = build_sensitive_pair(tmp_path_factory.mktemp(f"sensitive{seed}"), seed)
        return built[seed]

    return get
