"""Checkpoints whose language model sits inside a multimodal wrapper: the text config and weights specbench runs,
the vision tower left out (the benchmarks feed text only).

Qwen3.5 / 3.6 ship as Qwen3_5(Moe)ForConditionalGeneration: config.json nests the language model's config under
`text_config`, and the weights name it `model.language_model.*` beside `model.visual.*` (the vision tower), with
`lm_head.*` and `mtp.*` at the top as in the text-only checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from specbench.errors import SpecbenchError

# wrapper architecture -> the text model's architecture (config.py _ARCHITECTURES knows it)
TEXT_MODELS = {
    "Qwen3_5ForConditionalGeneration": "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForConditionalGeneration": "Qwen3_5MoeForCausalLM",
}
LANGUAGE_MODEL_PREFIX = "model.language_model."
_VISION_PREFIXES = ("model.visual.",)


def text_config_of(hf: dict) -> tuple[dict, bool]:
    """(the config to parse, whether it came out of a multimodal wrapper): a wrapper's `text_config` with the text
    model's architecture (and the wrapper's tie_word_embeddings where the text config does not say); else `hf`."""
    names = hf.get("architectures") or []
    wrapper = next((n for n in names if isinstance(n, str) and n in TEXT_MODELS), None)
    if wrapper is None:
        return hf, False
    text = hf.get("text_config")
    if not isinstance(text, dict):
        raise SpecbenchError(f"model config of {wrapper} has no 'text_config' object (the language model's config)")
    unwrapped = {**text, "architectures": [TEXT_MODELS[wrapper]]}
    if "tie_word_embeddings" not in text and "tie_word_embeddings" in hf:
        unwrapped["tie_word_embeddings"] = hf["tie_word_embeddings"]
    return unwrapped, True


def language_model_names(weights: Iterable[tuple[str, torch.Tensor]]) -> Iterable[tuple[str, torch.Tensor]]:
    """A wrapper checkpoint's tensors under the text model's names; the vision tower's are skipped."""
    for name, tensor in weights:
        if name.startswith(_VISION_PREFIXES):
            continue
        if name.startswith(LANGUAGE_MODEL_PREFIX):
            name = "model." + name[len(LANGUAGE_MODEL_PREFIX):]
        yield name, tensor
