"""The streaming detokenizer is incremental (decode work linear in the output length) and its deltas add up to the
full decode: characters split across byte tokens, SentencePiece's leading-space rule, stop strings."""

from __future__ import annotations

import random

import pytest

from specbench.serve.text_stream import TextStreamer
from tests.support.tiny_models import gsm8k_questions, load_tiny_tokenizer


class CountingTokenizer:
    """Wraps a tokenizer and counts the token ids it is asked to decode."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.num_decoded = 0
        self.num_calls = 0

    def decode(self, ids, skip_special_tokens=True) -> str:
        self.num_calls += 1
        self.num_decoded += len(ids)
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)


def _stream(tokenizer, token_ids, *, seed=0, max_step=4, stop=()) -> tuple[list[str], TextStreamer]:
    """Push token_ids in engine-step-sized groups; returns the deltas (finish's included)."""
    streamer = TextStreamer(tokenizer, stop)
    rng = random.Random(seed)
    deltas, i = [], 0
    while i < len(token_ids):
        n = rng.randint(1, max_step)
        deltas.append(streamer.push(token_ids[i : i + n]))
        i += n
    full = tokenizer.decode(token_ids, skip_special_tokens=True)
    final = full[: min((full.find(s) for s in stop if s in full), default=len(full))]
    deltas.append(streamer.finish(final))
    return deltas, streamer


@pytest.fixture(scope="module")
def tokenizer():
    return load_tiny_tokenizer()


@pytest.fixture(scope="module")
def long_ids(tokenizer) -> list[int]:
    pieces, ids = [], []
    for question in gsm8k_questions("test"):
        pieces.append(question + " Ça coûte 5 € — 日本語で🎉. ")
        ids = tokenizer("".join(pieces), add_special_tokens=False)["input_ids"]
        if len(ids) >= 2000:
            break
    return ids[:2000]


def test_decode_work_is_linear_in_the_output_length(tokenizer, long_ids):
    counting = CountingTokenizer(tokenizer)
    deltas, _ = _stream(counting, long_ids, max_step=1)
    assert "".join(deltas) == tokenizer.decode(long_ids, skip_special_tokens=True)
    assert deltas[-1] == ""  # everything was streamed before the end
    # A full re-decode per step decodes ~n^2/2 = 2,000,000 ids; a window of a few tokens per step is linear.
    assert counting.num_decoded <= 10 * len(long_ids), counting.num_decoded
    assert counting.num_calls <= 2 * len(long_ids) + 1


def test_multi_byte_characters_split_across_tokens_are_never_sent_in_halves(tokenizer, long_ids):
    is_split = [("\ufffd" in tokenizer.decode([t])) for t in long_ids]
    assert any(is_split), "the text must contain characters split over byte tokens"
    for seed in range(3):
        deltas, _ = _stream(tokenizer, long_ids, seed=seed)
        assert not any("\ufffd" in d for d in deltas)
        assert "".join(deltas) == tokenizer.decode(long_ids, skip_special_tokens=True)


def _sentencepiece_tokenizer():
    """Llama-2-style decoding: `▁` is a space, bytes fall back to <0xNN>, the text's first space is stripped."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"<0x{b:02X}>": 3 + b for b in range(256)}}
    for word in ("▁Hello", "▁world", "▁", "n", "▁Paris", "!"):
        vocab[word] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True))
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    return fast, vocab


def test_leading_spaces_of_sentencepiece_tokens_are_kept():
    tokenizer, vocab = _sentencepiece_tokenizer()
    words = ["<s>", "▁Hello", "▁world", "▁", "<0xC3>", "<0xBC>", "n", "<0xC3>", "<0xAF>", "▁Paris", "!",
             "▁", "<0xF0>", "<0x9F>", "<0x8E>", "<0x89>", "</s>"]
    ids = [vocab[w] for w in words]
    assert tokenizer.decode([vocab["▁world"]]) == "world"  # alone, the space is lost: context matters
    full = tokenizer.decode(ids, skip_special_tokens=True)
    assert full == "Hello world ünï Paris! 🎉"
    for max_step in (1, 2, 3):
        deltas, _ = _stream(tokenizer, ids, max_step=max_step, seed=max_step)
        assert "".join(deltas) == full and not any("\ufffd" in d for d in deltas)
        assert deltas[-1] == ""


def test_stop_strings_cut_the_stream_as_the_final_text_is_cut(tokenizer, long_ids):
    full = tokenizer.decode(long_ids, skip_special_tokens=True)
    stop = full[1500:1512]
    deltas, streamer = _stream(tokenizer, long_ids, stop=(stop, "never-there"))
    assert "".join(deltas) == full[: full.find(stop)]
    assert all(stop not in d for d in deltas)
    assert len(streamer.token_ids) == len(long_ids)
