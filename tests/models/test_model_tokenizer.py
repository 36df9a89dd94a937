"""Tokenizer loading, EOS ids and chat templates."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest
from tests.support.tiny_models import EOS_ID, gsm8k_questions, tiny_tokenizer_dir

from specbench.errors import SpecbenchError
from specbench.models import apply_chat_template, eos_token_ids, get_preset, load_tokenizer


def test_round_trip_on_real_text():
    tok = load_tokenizer(tiny_tokenizer_dir())
    for text in gsm8k_questions("test")[:20]:
        ids = tok(text)["input_ids"]
        assert tok.decode(ids) == text
        assert len(ids) < len(text.encode()) / 2  # a trained BPE, not bytes
    assert len(tok) == 1024


def test_eos_ids_merge_config_and_tokenizer():
    tok = load_tokenizer(tiny_tokenizer_dir())
    config = get_preset("tiny-llama")
    assert tok.eos_token_id == EOS_ID
    assert eos_token_ids(replace(config, eos_token_ids=(EOS_ID,)), tok) == (EOS_ID,)
    assert eos_token_ids(replace(config, eos_token_ids=(7, 9)), tok) == (7, 9, EOS_ID)
    assert eos_token_ids(replace(config, eos_token_ids=(7,)), None) == (7,)


def test_chat_template():
    tok = load_tokenizer(tiny_tokenizer_dir())
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    text = apply_chat_template(tok, messages)
    assert text == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"
    assert not apply_chat_template(tok, messages, add_generation_prompt=False).endswith("assistant\n")
    tok.chat_template = None
    with pytest.raises(SpecbenchError, match="no chat template"):
        apply_chat_template(tok, messages)


def test_load_errors(tmp_path):
    with pytest.raises(SpecbenchError, match="cannot load a tokenizer"):
        load_tokenizer(tmp_path)
    shutil.copytree(tiny_tokenizer_dir(), tmp_path / "broken")
    (tmp_path / "broken" / "tokenizer.json").write_text("{not json")
    with pytest.raises(SpecbenchError, match="cannot load a tokenizer"):
        load_tokenizer(tmp_path / "broken")
