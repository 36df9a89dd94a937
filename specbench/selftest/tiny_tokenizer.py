"""A tokenizer for the selftest's tiny targets (tiny.py writes none): its constrained rows need one, since grammars are
compiled against token strings (llguidance builds its token trie from it).

Byte-level BPE built by hand, no training data: the tiny targets' special ids (0..3, EOS 2 as their config says),
the 256 bytes, then two-character merges of the characters JSON and the rows' patterns use, until every one of the
targets' VOCAB_SIZE ids has a string (an id with none would decode to nothing in a reasoning section). Merged tokens
make token boundaries straddle grammar boundaries (`":` , `e,`), as real vocabularies do.
"""

from __future__ import annotations

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


def write_tiny_tokenizer(out_dir: str | Path) -> str:
    """Write the tokenizer (tokenizer.json and its config) under `out_dir`; returns the directory."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    out = Path(out_dir)
    if (out / "tokenizer.json").exists():
        return str(out)
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())  # [256] the byte-level characters
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
    for char in alphabet:
        vocab[char] = len(vocab)
    merges = _merges(VOCAB_SIZE - len(vocab))
    for a, b in merges:
        vocab[a + b] = len(vocab)
    assert len(vocab) == VOCAB_SIZE, len(vocab)
    bpe = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.add_special_tokens(list(SPECIAL_TOKENS))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=SPECIAL_TOKENS[0], eos_token=EOS_TOKEN,
                                  pad_token=SPECIAL_TOKENS[3])
    tok.save_pretrained(out)
    return str(out)
