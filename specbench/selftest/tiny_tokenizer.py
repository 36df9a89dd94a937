"""A tokenizer for the selftest's tiny targets (tiny.py writes none): its constrained rows need one, since grammars are
compiled against token strings (llguidance builds its token trie from it).

Byte-level BPE built by hand, no training data: the tiny targets' special ids (0..3, EOS 2 as their config says),
the 256 bytes, then two-character merges of the characters JSON and the rows' patterns use, until every one of the
targets' VOCAB_SIZE ids has a string (an id with none would decode to nothing in a reasoning section). Merged tokens
make token boundaries straddle grammar boundaries (`":` , `e,`), as real vocabularies do.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

from specbench.selftest.tiny import VOCAB_SIZE

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>")  # ids 0..3, as the tiny config's
EOS_TOKEN = "<|im_end|>"  # id 2: the tiny config's eos_token_id
# Characters whose pairs become merged tokens, most useful first (JSON punctuation, then the rows' words and digits).
_MERGE_CHARS = '"{}:,' + string.ascii_lowercase + string.digits


def _merges(count: int) -> list[tuple[str, str]]:
    """The first `count` pairs of _MERGE_CHARS in a fixed order (each pair's characters are single bytes)."""
    pairs = [(a, b) for a in _MERGE_CHARS for b in _MERGE_CHARS]
    return pairs[:count]


def _byte_alphabet() -> list[str]:
    """[256] the byte-level characters (GPT-2's byte-to-unicode map: printable bytes stand for themselves, the rest
    for the characters from U+0100 on), in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1),
                 *range(ord("\u00ae"), ord("\u00ff") + 1)]
    shifted = iter(range(256, 512))
    return [chr(b) if b in printable else chr(next(shifted)) for b in range(256)]


def _tokenizer_json(vocab: dict[str, int], merges: list[tuple[str, str]]) -> dict:
    """tokenizer.json of a byte-level BPE (the `tokenizers` library's format; written as data, no training)."""
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, t in enumerate(SPECIAL_TOKENS)],
        "normalizer": None, "pre_tokenizer": byte_level, "post_processor": None,
        "decoder": {**byte_level, "add_prefix_space": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [list(m) for m in merges]},
    }


def write_tiny_tokenizer(out_dir: str | Path) -> str:
    """Write the tokenizer (tokenizer.json and its config) under `out_dir`; returns the directory."""
    from transformers import PreTrainedTokenizerFast

    out = Path(out_dir)
    if (out / "tokenizer_config.json").exists():
        return str(out)
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
    for char in sorted(_byte_alphabet()):  # printable ASCII first: ids 4.. are "!", '"', ...
        vocab[char] = len(vocab)
    merges = _merges(VOCAB_SIZE - len(vocab))
    for a, b in merges:
        vocab[a + b] = len(vocab)
    assert len(vocab) == VOCAB_SIZE, len(vocab)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(json.dumps(_tokenizer_json(vocab, merges)))
    tok = PreTrainedTokenizerFast(tokenizer_file=str(out / "tokenizer.json"), bos_token=SPECIAL_TOKENS[0],
                                  eos_token=EOS_TOKEN, pad_token=SPECIAL_TOKENS[3])
    tok.save_pretrained(out)
    return str(out)
