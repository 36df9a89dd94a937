"""Tokenizer loading (via transformers), EOS ids and chat templates, with user-facing errors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.errors import SpecbenchError
from specbench.models.config import ModelConfig

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def has_tokenizer_files(directory: str | Path) -> bool:
    return any((Path(directory) / name).is_file() for name in _TOKENIZER_FILES)


def load_tokenizer(path_or_id: str | Path, gguf_file: str | None = None) -> PreTrainedTokenizerBase:
    from transformers import AutoTokenizer

    kwargs = {"gguf_file": gguf_file} if gguf_file else {}
    try:
        return AutoTokenizer.from_pretrained(str(path_or_id), **kwargs)
    except Exception as e:  # transformers raises many types here (OSError, ValueError, KeyError, ...)
        where = f"{path_or_id}/{gguf_file}" if gguf_file else str(path_or_id)
        raise SpecbenchError(f"cannot load a tokenizer from {where}: {e}") from e


def eos_token_ids(config: ModelConfig, tokenizer: PreTrainedTokenizerBase | None) -> tuple[int, ...]:
    """The config's EOS ids, then the tokenizer's if different (chat models often end turns with it)."""
    ids = list(config.eos_token_ids)
    token_id = getattr(tokenizer, "eos_token_id", None)
    if token_id is not None and token_id not in ids:
        ids.append(int(token_id))
    return tuple(ids)


def apply_chat_template(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[Mapping[str, str]],  # [{"role": ..., "content": ...}, ...]
    *,
    add_generation_prompt: bool = True,
) -> str:
    if not getattr(tokenizer, "chat_template", None):
        name = getattr(tokenizer, "name_or_path", "") or "this model"
        raise SpecbenchError(f"the tokenizer of {name} has no chat template; use a raw-prompt workload instead")
    return tokenizer.apply_chat_template(
        [dict(m) for m in messages], tokenize=False, add_generation_prompt=add_generation_prompt
    )
