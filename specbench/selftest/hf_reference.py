"""The selftest's reference engine checked against HF transformers on the seed's tiny target (the class its config's
model_type names: LlamaForCausalLM, Qwen3ForCausalLM for the q/k-norm variant; a Llama class would drop the norms).

The reference engine (check/reference.py) shares no code with the fast path, but it does share the eager layers
with it. Greedy decoding by transformers on the same weights (fp32, CPU, a full forward per token, no KV cache)
shares none: when the two disagree, the eager layers or the loader are wrong, and every greedy verdict built
on the reference is void.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

from specbench.check.reference import ReferenceCrossCheck

# transformers before 5.23 normalizes Bamba's gated RMSNorm over the whole intermediate size; mamba_ssm, and
# transformers since 5.23, over each of the mamba_n_groups groups (what the engine does). The two agree for one
# group; for more, an older transformers is no reference for the target (the GPU image ships 5.17).
HF_BAMBA_GROUPED_NORM = "5.23.0"


def _release(version: str) -> tuple[int, ...]:
    """(major, minor, patch) of a version string ("5.23.0.dev0" -> (5, 23, 0))."""
    return tuple(int(re.match(r"\d*", part).group() or 0) for part in version.split(".")[:3])


def transformers_version() -> str:
    import transformers

    return transformers.__version__


def hf_bamba_mismatch(n_groups: int, version: str | None = None) -> str | None:
    """Why transformers `version` (None: the installed one) cannot be the reference of a Bamba target with
    `n_groups` groups; None: it can."""
    version = transformers_version() if version is None else version
    if n_groups > 1 and _release(version) < _release(HF_BAMBA_GROUPED_NORM):
        return (f"transformers {version} normalizes Bamba's gated RMSNorm over all {n_groups} groups together "
                f"(per group, as mamba_ssm does, since {HF_BAMBA_GROUPED_NORM})")
    return None


def hf_reference_mismatch(target_dir: str) -> str | None:
    """hf_bamba_mismatch for the HF directory's config (Bamba, Granite-4; None for every other model type)."""
    config = json.loads((Path(target_dir) / "config.json").read_text())
    if config.get("model_type") not in ("bamba", "granitemoehybrid"):  # Granite-4's mixer is transformers' Bamba one
        return None
    return hf_bamba_mismatch(int(config.get("mamba_n_groups", 1)))


@torch.inference_mode()
def hf_greedy(target_dir: str, prompts: tuple[tuple[int, ...], ...], max_tokens: int
              ) -> tuple[str, list[tuple[int, ...]]]:
    """The transformers class used, and [num_prompts] max_tokens greedy tokens each (EOS ignored), by transformers on
    the HF directory's weights."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    had_progress_bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # the selftest prints its table only
    try:
        model = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32, local_files_only=True).eval()
    finally:
        if had_progress_bar:
            hf_logging.enable_progress_bar()
    outputs = []
    for prompt in prompts:
        ids = list(prompt)
        for _ in range(max_tokens):
            logits = model(torch.tensor([ids])).logits[0, -1]  # [vocab]
            ids.append(int(logits.argmax()))
        outputs.append(tuple(ids[len(prompt):]))
    return type(model).__name__, outputs


def cross_check_reference(target_dir: str, prompts: tuple[tuple[int, ...], ...], max_tokens: int,
                          reference: list[tuple[int, ...]]) -> ReferenceCrossCheck:
    mismatch = hf_reference_mismatch(target_dir)
    if mismatch is not None:  # not compared, saying why: a disagreement would be transformers', not the engine's
        return ReferenceCrossCheck(True, f"reference engine vs HF transformers: not compared: {mismatch}")
    hf_class, expected = hf_greedy(target_dir, prompts, max_tokens)
    firsts = [next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None if len(got) == len(want) else 0)
              for got, want in zip(reference, expected)]
    diverged = [(r, i) for r, i in enumerate(firsts) if i is not None]
    detail = (f"reference engine vs HF transformers {hf_class} greedy (fp32 CPU): "
              f"{len(prompts) - len(diverged)}/{len(prompts)} prompts identical")
    if diverged:
        detail += "; first divergence: " + ", ".join(f"req {r} @ {i}" for r, i in diverged[:8])
    return ReferenceCrossCheck(not diverged, detail)
