"""Two MTP modules (DeepSeek-V3's num_nextn_predict_layers = 2, layer-index dialect) on the dense tiny target:
greedy output is the plain engine's with and without preemption; every draft step's logits match the oracle's
cache-free recomputation of the module chain (module 0 at step 0, module 1 at step 1, module 1 reused at step 2);
the oracle sees a step run by the wrong module and a catch-up that loses the previous module's last row."""

from __future__ import annotations

import pytest
import torch

from specbench import LLM, SamplingParams
from specbench.check.oracle import FP32_RTOL, record_and_compare
from specbench.check.reference import build_reference_drafting_llm
from specbench.errors import SpecbenchError
from specbench.selftest.tiny import build_tiny_pair, random_prompts
from specbench.selftest.tiny_mtp import LAYER_INDEX, MTP_PREFIX, build_mtp_target
from specbench.speculation.drafters.mtp.multi_module import MultiModuleMtpProposer

MAX_TOKENS = 16
PREEMPTING_KV_BLOCKS = 14  # as tests/mtp/test_mtp_engine.py: 4 requests of up to 30 + 16 + k tokens do not fit
PARAMS = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> str:
    return build_tiny_pair(tmp_path_factory.mktemp("pair"), seed=0)[0]


@pytest.fixture(scope="module")
def target(base, tmp_path_factory) -> str:
    return build_mtp_target(base, tmp_path_factory.mktemp("mtp2") / "target", LAYER_INDEX, num_modules=2)


@pytest.fixture(scope="module")
def prompts() -> list[list[int]]:
    return random_prompts(4, seed=0, vocab_size=500, max_len=30)


@pytest.fixture(scope="module")
def plain_outputs(target, prompts) -> list[list[int]]:
    llm = LLM(target, dtype="fp32", device="cpu", block_size=4, max_concurrency=4, kv_cache_gb=0.05)
    return [list(o.output_token_ids) for o in llm.generate(prompts, PARAMS)]


def _mtp_llm(target: str, is_preempting: bool) -> LLM:
    pool = {"num_kv_blocks": PREEMPTING_KV_BLOCKS} if is_preempting else {"kv_cache_gb": 0.05}
    return LLM(target, dtype="fp32", device="cpu", block_size=4, max_concurrency=4, method="mtp", max_num_steps=3,
               **pool)


@pytest.mark.parametrize("is_preempting", [False, True], ids=["roomy", "preempting"])
def test_greedy_matches_plain_engine(target, prompts, plain_outputs, is_preempting):
    llm = _mtp_llm(target, is_preempting)
    proposer = llm.engine.proposer
    assert isinstance(proposer, MultiModuleMtpProposer) and len(proposer.modules) == 2
    assert [m.layers[0].self_attn.layer_idx for m in proposer.modules] == [0, 1]  # one KV layer each
    outs = llm.generate(prompts, PARAMS)
    assert [list(o.output_token_ids) for o in outs] == plain_outputs
    assert (sum(o.stats.num_preemptions for o in outs) > 0) == is_preempting
    assert sum(o.stats.num_accepted_per_pos[0] for o in outs) > 0
    assert proposer.describe()["num_modules"] == 2


def _oracle(llm: LLM, prompts) -> tuple[int, list[str]]:
    reference = build_reference_drafting_llm(llm.engine.config)  # its own modules, clean
    return record_and_compare(llm, reference, prompts, PARAMS, FP32_RTOL)


def test_oracle_recomputes_both_modules(target, prompts):
    num, bad = _oracle(_mtp_llm(target, True), prompts)
    assert num > 0 and bad == []


def test_oracle_sees_the_wrong_module(target, prompts):
    """Step 1 drafted by module 0 (the one-module proposer's reuse) instead of module 1."""
    llm = _mtp_llm(target, True)
    proposer = llm.engine.proposer
    proposer.modules = (proposer.modules[0], proposer.modules[0])
    num, bad = _oracle(llm, prompts)
    assert num > 0 and any(" step 1 " in line for line in bad), bad[:3]


def test_oracle_sees_a_lost_carry(target, prompts, monkeypatch):
    """Module 1's catch-up reads a zero hidden on each round's first row instead of module 0's last committed row
    (the reference recomputes cache-free and never calls _previous_row)."""
    original = MultiModuleMtpProposer._previous_row

    def lost(self, inp, caught_up, starts, m, previous_out, last_rows):
        shifted = original(self, inp, caught_up, starts, m, previous_out, last_rows)
        first_rows = torch.cat([last_rows.new_zeros(1), last_rows[:-1] + 1])
        shifted[first_rows] = 0.0
        return shifted

    monkeypatch.setattr(MultiModuleMtpProposer, "_previous_row", lost)
    num, bad = _oracle(_mtp_llm(target, True), prompts)
    assert num > 0 and bad, "a lost carry went unseen"


def test_several_layers_in_the_mtp_prefix_dialect_are_refused(base, tmp_path):
    target = build_mtp_target(base, tmp_path / "qwen3next", MTP_PREFIX)
    import json
    from pathlib import Path

    config_path = Path(target) / "config.json"
    config = json.loads(config_path.read_text())
    config["mtp_num_hidden_layers"] = 2
    config_path.write_text(json.dumps(config))
    with pytest.raises(SpecbenchError, match="layer-index dialect only"):
        _mtp_llm(target, False)
