"""`--load-format dummy` targets draft with a random MTP module of the shape their config declares; a dummy
target without one is one clear error."""

from __future__ import annotations

import json

import pytest

from specbench import LLM, SamplingParams
from specbench.errors import SpecbenchError
from specbench.selftest.tiny import tiny_llama_config

PROMPTS = [[5, 6, 7, 8, 9], [10, 11, 12]]


def _config(tmp_path, **fields) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**tiny_llama_config(), **fields}))
    return str(path)


def test_dummy_target_drafts_with_a_random_module(tmp_path):
    source = _config(tmp_path, num_nextn_predict_layers=1)
    params = SamplingParams(max_tokens=8, ignore_eos=True)
    common = {"load_format": "dummy", "dtype": "fp32", "device": "cpu", "kv_cache_gb": 0.02, "block_size": 4}
    plain = LLM(source, **common).generate(PROMPTS, params)
    llm = LLM(source, method="mtp", max_num_steps=2, **common)
    outs = llm.generate(PROMPTS, params)
    assert [o.output_token_ids for o in outs] == [o.output_token_ids for o in plain]
    assert llm.engine.proposer.describe()["dialect"] == "dummy"
    assert sum(o.stats.num_draft_tokens for o in outs) > 0


def test_dummy_target_without_mtp_is_one_error(tmp_path):
    with pytest.raises(SpecbenchError, match="has no MTP module"):
        LLM(_config(tmp_path), load_format="dummy", dtype="fp32", device="cpu", kv_cache_gb=0.02, method="mtp",
            max_num_steps=2)
